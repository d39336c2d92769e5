/** Test helper: one HTTPS request to a throw-away server, trusting only a given CA, under a given DNS name. */
import https from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';

/** Resolves every name to loopback, so a Service DNS name can be used while traffic stays on 127.0.0.1. */
export const loopbackLookup: LookupFunction = (_host, opts, cb) => {
  if (opts.all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
};

export interface Reply {
  status: number;
  text: string;
}

/**
 * One request to https://<servername>:<port><path> over loopback, trusting only caPem; rejects on
 * any TLS failure. agent:false: a fresh connection (and TLS handshake) each time, so certificate
 * changes are seen.
 */
export function httpsRequest(port: number, servername: string, caPem: string, method: string, path: string, body?: string | Buffer, contentType = 'application/json'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers = body === undefined ? {} : { 'content-type': contentType };
    const req = https.request({ host: servername, port, path, method, ca: caPem, lookup: loopbackLookup, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** GET, resolving with the body. */
export async function httpsGet(port: number, servername: string, caPem: string, path = '/'): Promise<string> {
  return (await httpsRequest(port, servername, caPem, 'GET', path)).text;
}

/** Starts an HTTPS server with the pair and makes one request trusting `caPem`, reaching 127.0.0.1 under `servername`. */
export async function fetchOverTls(pair: { certPem: string; keyPem: string }, caPem: string, servername: string): Promise<string> {
  const server = https.createServer({ cert: pair.certPem, key: pair.keyPem, minVersion: 'TLSv1.2' }, (_req, res) => res.end('hello'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    return await httpsGet(port, servername, caPem);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}
