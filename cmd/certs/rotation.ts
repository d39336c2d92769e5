/**
 * Deciding what the webhook's certificates should be, given what is stored now. One function,
 * used by the in-cluster bootstrap (state in two Secrets) and the `generate` CLI (state in a
 * folder), so both reuse what is still good and renew what is not, for the same reasons.
 *
 * Overlapping rotation: when the CA is replaced, the old CA stays in the trust bundle (as
 * "previous") until it expires. The caller writes the bundle into the webhook configurations
 * before it writes the new leaf, so at every moment the apiserver trusts whichever leaf the
 * webhook happens to serve: the old one (old CA still in the bundle) or the new one.
 */
import { isIP } from 'node:net';
import { inspectCert, isIssuedBy, keyMatchesCert, splitPemBundle, type CertInfo } from '../../src/cert-info.js';
import { createCA, createServingCert, serviceDnsNames, DEFAULT_CA_VALIDITY_DAYS, DEFAULT_LEAF_VALIDITY_DAYS, type CertKeyPair, type ServingOptions } from './pki.js';

/** The CA store (a Secret or files): the signing CA and older CAs that are still trusted. */
export interface CaStore {
  readonly certPem?: string;
  readonly keyPem?: string;
  /** Earlier CAs kept in the bundle until they expire. */
  readonly previousPem?: string;
}

/** The serving store (the Secret the webhook mounts): leaf, key and the trust bundle. */
export interface ServingStore {
  readonly certPem?: string;
  readonly keyPem?: string;
  readonly caBundlePem?: string;
}

/** The leaf's names and the clock as for createServingCert; validity and renewal for both certificates. */
export interface RotationOptions extends Omit<ServingOptions, 'validityDays'> {
  readonly caValidityDays?: number;
  readonly leafValidityDays?: number;
  /** Renew the leaf when less than this remains; default a third of its validity. */
  readonly leafRenewBeforeDays?: number;
  /** Replace the CA when less than this remains; default a third of its validity. */
  readonly caRenewBeforeDays?: number;
  readonly now?: Date;
}

export interface CertificatePlan {
  readonly ca: Required<CaStore>;
  readonly serving: Required<ServingStore>;
  /** The CA store must be written (new CA, or the list of previous CAs changed). */
  readonly caChanged: boolean;
  /** The serving store must be written (new leaf, or a different bundle). */
  readonly servingChanged: boolean;
  /** Why, one line each, for logs and the CLI's output. Empty when everything was reused. */
  readonly reasons: string[];
}

const DAY_MS = 86_400_000;

/** Canonical text of an IP address (`0:0:0:0:0:0:0:1` and `::1` are the same SAN). */
export function normalizeIp(ip: string): string {
  const v = isIP(ip);
  if (v === 4) return new URL(`http://${ip}/`).hostname;
  if (v === 6) return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  return ip;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const sa = new Set(a);
  const sb = new Set(b);
  return sa.size === sb.size && [...sa].every((x) => sb.has(x));
}

function daysLeft(info: CertInfo, now: Date): number {
  return (info.notAfter.getTime() - now.getTime()) / DAY_MS;
}

/** Why the stored CA cannot be kept, or undefined when it can. */
function caProblem(store: CaStore | undefined, renewBeforeDays: number, now: Date): string | undefined {
  if (store?.certPem === undefined || store.keyPem === undefined) return 'no CA stored yet';
  const info = inspectCert(store.certPem);
  if (info === undefined) return 'the stored CA certificate does not parse';
  if (!info.isCA) return 'the stored CA certificate is not a CA (basicConstraints CA:FALSE)';
  if (!keyMatchesCert(store.certPem, store.keyPem)) return 'the stored CA key does not belong to the CA certificate';
  const left = daysLeft(info, now);
  if (left < renewBeforeDays) return `the CA expires in ${left.toFixed(1)} days (renewing ${renewBeforeDays} days before)`;
  return undefined;
}

/** Why the stored leaf cannot be kept, or undefined when it can. */
function leafProblem(store: ServingStore | undefined, caPem: string, wantDns: readonly string[], wantIps: readonly string[], renewBeforeDays: number, now: Date): string | undefined {
  if (store?.certPem === undefined || store.keyPem === undefined) return 'no serving certificate stored yet';
  const info = inspectCert(store.certPem);
  if (info === undefined) return 'the stored serving certificate does not parse';
  if (!keyMatchesCert(store.certPem, store.keyPem)) return 'the stored serving key does not belong to the serving certificate';
  if (!isIssuedBy(store.certPem, caPem)) return 'the serving certificate was not issued by the current CA';
  if (!sameSet(info.dnsNames, wantDns) || !sameSet(info.ips.map(normalizeIp), wantIps)) {
    return `the serving certificate names ${[...info.dnsNames, ...info.ips].join(',')}, wanted ${[...wantDns, ...wantIps].join(',')}`;
  }
  const left = daysLeft(info, now);
  if (left < renewBeforeDays) return `the serving certificate expires in ${left.toFixed(1)} days (renewing ${renewBeforeDays} days before)`;
  return undefined;
}

function stillValid(pem: string, now: Date): boolean {
  const info = inspectCert(pem);
  return info !== undefined && info.isCA && info.notAfter.getTime() > now.getTime();
}

export function planCertificates(caStore: CaStore | undefined, servingStore: ServingStore | undefined, opts: RotationOptions): CertificatePlan {
  const now = opts.now ?? new Date();
  const caValidity = opts.caValidityDays ?? DEFAULT_CA_VALIDITY_DAYS;
  const leafValidity = opts.leafValidityDays ?? DEFAULT_LEAF_VALIDITY_DAYS;
  const caRenewBefore = opts.caRenewBeforeDays ?? caValidity / 3;
  const leafRenewBefore = opts.leafRenewBeforeDays ?? leafValidity / 3;
  if (caRenewBefore >= caValidity || leafRenewBefore >= leafValidity) {
    // Otherwise every run would renew again: a fresh certificate would already be "due".
    throw new Error(`renew-before (CA ${caRenewBefore} days, leaf ${leafRenewBefore} days) must be shorter than the validity (CA ${caValidity} days, leaf ${leafValidity} days)`);
  }
  const reasons: string[] = [];

  // Old CAs that may still have signed the leaf being served right now stay trusted.
  const candidates = [...splitPemBundle(caStore?.previousPem ?? ''), ...splitPemBundle(servingStore?.caBundlePem ?? '')];
  let ca: CertKeyPair;
  const caWhy = caProblem(caStore, caRenewBefore, now);
  if (caWhy === undefined && caStore?.certPem !== undefined && caStore.keyPem !== undefined) {
    ca = { certPem: caStore.certPem, keyPem: caStore.keyPem };
  } else {
    reasons.push(`new CA: ${caWhy ?? 'unusable'}`);
    if (caStore?.certPem !== undefined) candidates.unshift(...splitPemBundle(caStore.certPem));
    ca = createCA({ validityDays: caValidity, now });
  }
  const caFingerprint = inspectCert(ca.certPem)?.fingerprint256;
  const previous: string[] = [];
  const seen = new Set([caFingerprint]);
  for (const pem of candidates) {
    const fp = inspectCert(pem)?.fingerprint256;
    if (fp === undefined || seen.has(fp) || !stillValid(pem, now)) continue;
    seen.add(fp);
    previous.push(pem);
  }
  const previousPem = previous.join('');
  const caBundlePem = [...splitPemBundle(ca.certPem), ...previous].join('');

  const wantDns = [...new Set([...serviceDnsNames(opts.service, opts.namespace), ...(opts.dnsNames ?? [])])];
  const wantIps = [...new Set((opts.ips ?? []).map(normalizeIp))];
  let leaf: CertKeyPair;
  const leafWhy = leafProblem(servingStore, ca.certPem, wantDns, wantIps, leafRenewBefore, now);
  if (leafWhy === undefined && servingStore?.certPem !== undefined && servingStore.keyPem !== undefined) {
    leaf = { certPem: servingStore.certPem, keyPem: servingStore.keyPem };
  } else {
    reasons.push(`new serving certificate: ${leafWhy ?? 'unusable'}`);
    leaf = createServingCert(ca, { service: opts.service, namespace: opts.namespace, ips: wantIps, dnsNames: opts.dnsNames ?? [], validityDays: leafValidity, now });
  }

  const caChanged = caStore?.certPem !== ca.certPem || caStore.keyPem !== ca.keyPem || (caStore.previousPem ?? '') !== previousPem;
  const servingChanged = servingStore?.certPem !== leaf.certPem || servingStore.keyPem !== leaf.keyPem || servingStore.caBundlePem !== caBundlePem;
  if (servingChanged && leafWhy === undefined) reasons.push('trust bundle changed');
  return {
    ca: { certPem: ca.certPem, keyPem: ca.keyPem, previousPem },
    serving: { certPem: leaf.certPem, keyPem: leaf.keyPem, caBundlePem },
    caChanged,
    servingChanged,
    reasons,
  };
}
