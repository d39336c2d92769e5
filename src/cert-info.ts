/**
 * Certificate reading, with node:crypto alone: what a certificate says (names, validity), whether a
 * key belongs to it, and who issued it. Shared by the webhook (it checks its serving pair before
 * serving and on every reload) and certs (rotation decisions). Making certificates needs
 * node-forge and stays in cmd/certs/pki.ts, so the webhook bundle does not carry it.
 */
import { X509Certificate, createPrivateKey } from 'node:crypto';

/** What rotation decisions need to know about a certificate. */
export interface CertInfo {
  readonly subject: string;
  readonly serial: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly isCA: boolean;
  readonly dnsNames: string[];
  readonly ips: string[];
  readonly fingerprint256: string;
}

/** Every PEM certificate block in a bundle, in order, each with LF line ends and one final newline. */
export function splitPemBundle(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((b) => `${b.replace(/\r\n/g, '\n')}\n`) ?? [];
}

/** Parses one PEM certificate; undefined when it is not one (the caller says what to do then). */
export function inspectCert(pem: string): CertInfo | undefined {
  let x: X509Certificate;
  try {
    x = new X509Certificate(pem);
  } catch {
    return undefined;
  }
  const dnsNames: string[] = [];
  const ips: string[] = [];
  // subjectAltName reads "DNS:a, DNS:b, IP Address:127.0.0.1"; our names never contain ", ".
  for (const part of (x.subjectAltName ?? '').split(', ')) {
    if (part.startsWith('DNS:')) dnsNames.push(part.slice(4));
    else if (part.startsWith('IP Address:')) ips.push(part.slice(11));
  }
  return {
    subject: x.subject,
    serial: x.serialNumber,
    notBefore: new Date(x.validFrom),
    notAfter: new Date(x.validTo),
    isCA: x.ca,
    dnsNames,
    ips,
    fingerprint256: x.fingerprint256,
  };
}

/** True when keyPem is the private key of certPem (false for anything unparseable). */
export function keyMatchesCert(certPem: string, keyPem: string): boolean {
  try {
    return new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}

/** True when `caPem` names itself as the issuer of `certPem` and its key verifies the signature. */
export function isIssuedBy(certPem: string, caPem: string): boolean {
  try {
    const cert = new X509Certificate(certPem);
    const ca = new X509Certificate(caPem);
    return cert.checkIssued(ca) && cert.verify(ca.publicKey);
  } catch {
    return false;
  }
}
