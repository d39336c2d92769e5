/**
 * The report as people read it (text) and as scripts read it (JSON, the report object as it is).
 * Pure: a report in, a string out.
 */
import type { Finding, PodPolicyReport, PodReport, Report, ServiceReport, Severity } from './report.js';
import { terminalLines } from '../../../src/terminal-text.js';

export type OutputFormat = 'text' | 'json';

const MARK: Record<Severity, string> = { ok: 'OK', info: 'INFO', warning: 'WARN', error: 'ERROR' };
const MARK_WIDTH = 7;

function findingLines(findings: readonly Finding[]): string[] {
  const lines = ['findings:'];
  for (const f of findings) {
    lines.push(`  ${MARK[f.severity].padEnd(MARK_WIDTH)}${f.code}: ${f.message}`);
    if (f.fix !== undefined) lines.push(`  ${''.padEnd(MARK_WIDTH)}fix: ${f.fix}`);
  }
  return lines;
}

function verdictLine(r: Report): string {
  const errors = r.findings.filter((f) => f.severity === 'error').map((f) => f.code);
  if (errors.length === 0) {
    const warnings = r.findings.filter((f) => f.severity === 'warning').length;
    return `verdict: ok, nothing found that stops traffic${warnings > 0 ? ` (${warnings} warning${warnings === 1 ? '' : 's'})` : ''}`;
  }
  return `verdict: problem: ${[...new Set(errors)].join(', ')}`;
}

function podLines(r: PodReport): string[] {
  const lines = [`Pod ${r.namespace}/${r.name}`];
  const s = r.sidecar;
  lines.push(
    s === undefined
      ? '  sidecar: not injected'
      : `  sidecar: injected (${s.mode}), ${s.ready ? 'ready' : 'not ready'}, ${s.state}, ${s.restarts} restarts, synced: ${s.synced === undefined ? 'unknown' : s.synced ? 'yes' : 'no'}`,
  );
  lines.push(`  networks${r.injected ? ' served' : ' it would serve'}:${r.networks.length === 0 ? ' none' : ''}`);
  for (const n of r.networks) {
    lines.push(`    ${n.network}${n.interface !== undefined ? ` on ${n.interface}` : ' (no interface in network-status)'}${n.addresses.length > 0 ? ` ${n.addresses.join(', ')}` : ''}`);
    for (const svc of n.services) {
      lines.push(`      Service ${svc.service} ${svc.clusterIP} ${svc.ports.join(',')}: ${svc.readyEndpoints} of ${svc.endpoints} endpoints ready`);
    }
  }
  if (r.policy !== undefined) lines.push(...policyLines(r.policy));
  return lines;
}

function policyLines(p: PodPolicyReport): string[] {
  const lines = [`  MultiNetworkPolicy: ${p.selectedBy.length === 0 ? 'none selects the pod' : p.enforced ? 'enforced by the sidecar' : 'NOT enforced (no sidecar)'}`];
  for (const s of p.selectedBy) {
    const dirs = [s.ingress ? 'ingress' : '', s.egress ? 'egress' : ''].filter((d) => d !== '').join(', ');
    lines.push(`    ${s.policy} (${dirs}) on ${s.networks.join(', ') || "none of the pod's networks"}${s.failure !== undefined ? ': cannot be compiled, allows nothing' : ''}`);
  }
  for (const n of p.networks) {
    const dir = (d: PodPolicyReport['networks'][number]['ingress']): string => (d.isolated ? `isolated by ${d.by.join(', ')}` : 'open');
    lines.push(`    ${n.network} on ${n.interface}: ingress ${dir(n.ingress)}; egress ${dir(n.egress)}`);
  }
  for (const v of p.probes) {
    lines.push(`  ${v.direction} ${v.peer} port ${v.port} on ${v.network}: ${v.result}${v.allowedBy !== undefined ? ` by ${v.allowedBy}` : ''}`);
    for (const r of v.rules) {
      lines.push(r.rule === undefined ? `    ${r.policy}: allows nothing` : `    ${r.policy} ${r.rule}: peer ${r.peer ? 'matches' : 'fails'}, port ${r.port ? 'matches' : 'fails'}`);
      for (const why of r.reasons) lines.push(`      ${why}`);
    }
  }
  return lines;
}

function serviceLines(r: ServiceReport): string[] {
  const lines = [`Service ${r.namespace}/${r.name}`];
  lines.push(`  networks:${r.networks.length === 0 ? ' none' : ''}`);
  for (const n of r.networks) lines.push(`    ${n.network}: NAD ${n.nad}, ${n.shared ? 'may be used' : 'not shared with this namespace'}`);
  if (r.selector !== undefined) lines.push(`  selector: ${r.selector}`);
  lines.push(`  pods selected:${r.pods.length === 0 ? ' none' : ''}`);
  const width = Math.max(0, ...r.pods.map((p) => p.pod.length));
  for (const p of r.pods) {
    const why = p.reasons.map((x) => x.code).join(', ');
    lines.push(`    ${p.pod.padEnd(width)}  ${p.state.padEnd(12)}${p.addresses.join(', ')}${why !== '' ? `${p.addresses.length > 0 ? '  ' : ''}(${why})` : ''}`.trimEnd());
  }
  lines.push(`  ready endpoints: ${r.readyEndpoints}`);
  return lines;
}

export function renderReport(r: Report, format: OutputFormat): string {
  if (format === 'json') return `${JSON.stringify(r, null, 2)}\n`;
  const head = r.kind === 'Pod' ? podLines(r) : serviceLines(r);
  // Every line carries cluster data (Event messages, names, annotation values): escaped, so only
  // the report's own line breaks break lines.
  return `${terminalLines([...head, '', ...findingLines(r.findings), '', verdictLine(r)])}\n`;
}
