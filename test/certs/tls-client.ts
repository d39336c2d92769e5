/** Test helper: one HTTPS request to a throw-away server, trusting only a given CA, under a given DNS name. */
import https from 'node:https';
import type { AddressInfo, LookupFunction } from 'node:net';

/** Resolves every name to loopback, so a Service DNS name can be used while traffic stays on 127.0.0.1. */
export const loopbackLookup: LookupFunction = (_host, opts, cb) => {
  if (opts.all) (cb as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  else cb(null, '127.0.0.1', 4);
};

/** GET https://<servername>:<port>/ over loopback trusting only caPem; resolves with the body, rejects on any TLS failure. */
export function httpsGet(port: number, servername: string, caPem: string, path = '/'): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    // agent:false: a fresh connection (and TLS handshake) each time, so certificate changes are seen.
    const req = https.request({ host: servername, port, path, ca: caPem, lookup: loopbackLookup, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
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

