/**
 * The certificates the webhook needs when cert-manager is not used: a private CA and a serving
 * certificate for the webhook's Service. node-forge builds and signs the X.509 structures; the
 * RSA keys come from node:crypto, whose native generator takes tens of milliseconds where
 * forge's pure-JavaScript one takes seconds. Reading certificates back (dates, SANs, issuer
 * checks) is src/cert-info.ts (node:crypto's X509Certificate, exact and fast), shared with the webhook.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';

/** A certificate and its private key, both PEM. */
export interface CertKeyPair {
  readonly certPem: string;
  readonly keyPem: string;
}

export interface CaOptions {
  /** Subject CN; a timestamp is appended so two CAs in one bundle are told apart by name too. */
  readonly commonName?: string;
  readonly validityDays?: number;
  readonly now?: Date;
}

export interface ServingOptions {
  readonly service: string;
  readonly namespace: string;
  /** Extra IP SANs (e.g. 127.0.0.1 for a webhook reached by URL in tests). */
  readonly ips?: readonly string[];
  /** Extra DNS SANs beyond the four Service names. */
  readonly dnsNames?: readonly string[];
  readonly validityDays?: number;
  readonly now?: Date;
}

export const DEFAULT_CA_VALIDITY_DAYS = 3650;
export const DEFAULT_LEAF_VALIDITY_DAYS = 365;
const RSA_BITS = 2048;
/** notBefore is backdated a little so a node whose clock lags does not see a "not yet valid" certificate. */
const BACKDATE_MS = 5 * 60_000;
const DAY_MS = 86_400_000;

/** The names a client may use to reach a Service: `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`. */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

function generateRsaKey(): { keyPem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: RSA_BITS });
  return {
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/**
 * 128 random bits as a positive DER integer: the first byte is kept in 0x01..0x7f so the value
 * is neither negative nor encoded with a redundant leading zero (strict parsers reject both).
 */
function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = ((bytes[0] ?? 1) & 0x7f) | 0x01;
  return bytes.toString('hex');
}

function newCertificate(publicPem: string, validityDays: number, now: Date): forge.pki.Certificate {
  if (!Number.isFinite(validityDays) || validityDays <= 0) {
    throw new Error(`certificate validity ${validityDays} days: must be a positive number of days`);
  }
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicPem);
  cert.serialNumber = randomSerial();
  cert.validity.notBefore = new Date(now.getTime() - BACKDATE_MS);
  cert.validity.notAfter = new Date(now.getTime() + validityDays * DAY_MS);
  return cert;
}

function sign(cert: forge.pki.Certificate, keyPem: string): string {
  cert.sign(forge.pki.privateKeyFromPem(keyPem), forge.md.sha256.create());
  // forge writes CRLF line ends; everything else (openssl, Go, kubectl) writes LF, and bundles are compared as text.
  return forge.pki.certificateToPem(cert).replace(/\r\n/g, '\n');
}

/**
 * A CN attribute encoded as UTF8String. forge defaults to PrintableString, which has no '@' (or
 * '_', '*', ...): Go's x509 parser, and so the apiserver reading a caBundle, rejects such a
 * certificate ("invalid PrintableString") although openssl accepts it.
 */
function commonName(value: string): forge.pki.CertificateField {
  return { name: 'commonName', value, valueTagClass: forge.asn1.Type.UTF8 as unknown as forge.asn1.Class };
}

/** A self-signed CA that may sign only end-entity certificates (pathLen 0). */
export function createCA(opts: CaOptions = {}): CertKeyPair {
  const now = opts.now ?? new Date();
  const { keyPem, publicPem } = generateRsaKey();
  const cert = newCertificate(publicPem, opts.validityDays ?? DEFAULT_CA_VALIDITY_DAYS, now);
  const subject = [commonName(`${opts.commonName ?? 'multus-proxy-webhook-ca'}@${Math.floor(now.getTime() / 1000)}`)];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: true },
  ]);
  return { certPem: sign(cert, keyPem), keyPem };
}

/** A TLS server certificate for the Service, signed by `ca`, with the Service's DNS names (and optional IPs) as SANs. */
export function createServingCert(ca: CertKeyPair, opts: ServingOptions): CertKeyPair {
  const now = opts.now ?? new Date();
  for (const ip of opts.ips ?? []) {
    if (isIP(ip) === 0) throw new Error(`serving certificate IP SAN ${JSON.stringify(ip)}: not an IPv4 or IPv6 address; write e.g. 127.0.0.1 or ::1`);
  }
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const { keyPem, publicPem } = generateRsaKey();
  const cert = newCertificate(publicPem, opts.validityDays ?? DEFAULT_LEAF_VALIDITY_DAYS, now);
  // A leaf must not outlive its CA: clients would reject it after the CA expires anyway.
  const caNotAfter = caCert.validity.notAfter;
  if (cert.validity.notAfter > caNotAfter) cert.validity.notAfter = new Date(caNotAfter.getTime());
  const dnsNames = [...serviceDnsNames(opts.service, opts.namespace), ...(opts.dnsNames ?? [])];
  cert.setSubject([commonName(`${opts.service}.${opts.namespace}.svc`)]);
  cert.setIssuer(caCert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      // GeneralName types: 2 = dNSName, 7 = iPAddress.
      altNames: [...[...new Set(dnsNames)].map((value) => ({ type: 2, value })), ...(opts.ips ?? []).map((ip) => ({ type: 7, ip }))],
    },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  return { certPem: sign(cert, ca.keyPem), keyPem };
}
