/**
 * A lean Kubernetes REST client on node:https. @kubernetes/client-node is only used for its
 * types: importing its runtime costs ~78 MB of RSS (bare node 41 MB, with client-node 120 MB),
 * too much for a sidecar in every pod, and its watch/informer do not survive what ours must.
 * One keep-alive agent per client; bearer token (re-read from tokenFile, since projected
 * service-account tokens rotate), client certificates and a CA are supported.
 */
import { EventEmitter } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import { readFile } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import type { ObjectList, WatchEvent } from './types.js';
import type { KubeConnection } from './config.js';
import { ExecCredentialSource } from './exec-credential.js';
import { ListItemSplitter } from './list-items.js';

export class KubeApiError extends Error {
  override readonly name = 'KubeApiError';
  /** HTTP status; 0 when the apiserver sent a watch ERROR without a code. */
  readonly status: number;
  /** The Status reason, e.g. `NotFound`, `AlreadyExists`, `Expired`, `Forbidden`, `Invalid`. */
  readonly reason?: string;
  /** The Status details (causes for Invalid, etc.). */
  readonly details?: unknown;
  /** The apiserver's own message, without our method/path prefix. */
  readonly apiMessage: string;

  constructor(status: number, apiMessage: string, reason?: string, details?: unknown, what?: string) {
    super(`${what ? `${what}: ` : ''}${status}${reason ? ` ${reason}` : ''}: ${apiMessage}`);
    this.status = status;
    this.apiMessage = apiMessage;
    if (reason !== undefined) this.reason = reason;
    if (details !== undefined) this.details = details;
  }
}

/** 410 Gone: the resourceVersion (or a continue token) is older than etcd's compaction; relist. */
export function isGone(e: unknown): boolean {
  return e instanceof KubeApiError && (e.status === 410 || e.reason === 'Expired' || e.reason === 'Gone');
}

/**
 * "Too large resource version": a list or watch at a resourceVersion this apiserver has not seen
 * yet (504 with cause ResourceVersionTooLarge); client-go then falls back to a quorum list.
 */
export function isTooLargeResourceVersion(e: unknown): boolean {
  if (!(e instanceof KubeApiError)) return false;
  const causes = (e.details as { causes?: { reason?: unknown }[] } | undefined)?.causes;
  return (Array.isArray(causes) && causes.some((c) => c?.reason === 'ResourceVersionTooLarge')) || /too large resource version/i.test(e.apiMessage);
}

export function isNotFound(e: unknown): boolean {
  return e instanceof KubeApiError && e.status === 404;
}

/** GET that answers undefined for 404, so "does it exist?" needs no try/catch at each caller. */
export async function getIfExists<T>(client: Pick<KubeClient, 'get'>, path: string, opts?: RequestOptions): Promise<T | undefined> {
  try {
    return await client.get<T>(path, opts);
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** 403: the caller may not do this (RBAC). */
export function isForbidden(e: unknown): boolean {
  return e instanceof KubeApiError && e.status === 403;
}

export function isConflict(e: unknown): boolean {
  return e instanceof KubeApiError && e.status === 409;
}

/** 422 Invalid: the apiserver's validation refused the object; sending it again changes nothing. */
export function isInvalid(e: unknown): e is KubeApiError {
  return e instanceof KubeApiError && e.status === 422;
}

/** Every verb takes an abort signal: a caller with a deadline (the leader's renew) must not wait out the request timeout. */
export interface RequestOptions {
  signal?: AbortSignal;
}

export interface ListOptions extends RequestOptions {
  labelSelector?: string;
  fieldSelector?: string;
  /** Page size; default 500; 0 = one unpaginated list. */
  limit?: number;
  continue?: string;
  resourceVersion?: string;
}

export interface ListItemsOptions<T> extends ListOptions {
  /**
   * Applied to each item as soon as it is parsed, before the next one is: an informer's slimming
   * transform, so the full objects of a large list never live all at once.
   */
  transform?: (item: T) => T;
}

export interface WatchOptions extends ListOptions {
  allowWatchBookmarks?: boolean;
  timeoutSeconds?: number;
}

export interface WriteOptions extends RequestOptions {
  dryRun?: boolean;
  fieldManager?: string;
}

export interface DeleteOptions extends RequestOptions {
  propagationPolicy?: string;
  /** 0 deletes a pod at once, as the kubelet does once its containers stopped; unset: the object's own grace period. */
  gracePeriodSeconds?: number;
}

export type PatchType = 'json' | 'merge' | 'strategic' | 'apply';

export interface KubeClient {
  get<T>(path: string, opts?: RequestOptions): Promise<T>;
  /**
   * Follows `continue` pages and returns all items with the first page's resourceVersion (one
   * snapshot). Each page is parsed item by item as it arrives (list-items.ts), and `transform`
   * applied to each.
   */
  list<T>(path: string, opts?: ListItemsOptions<T>): Promise<ObjectList<T>>;
  create<T>(path: string, body: T, opts?: WriteOptions): Promise<T>;
  replace<T>(path: string, body: T, opts?: WriteOptions): Promise<T>;
  patch<T>(path: string, patch: unknown, type: PatchType, opts?: WriteOptions & { force?: boolean }): Promise<T>;
  /** 404 is not an error: the object is gone either way. */
  delete(path: string, opts?: DeleteOptions): Promise<void>;
  /**
   * Streams watch events to onEvent until the server ends the watch (resolves), the signal aborts
   * (resolves), or something fails (rejects; an ERROR event becomes a KubeApiError, 410 included).
   */
  watch<T>(path: string, opts: WatchOptions, onEvent: (e: WatchEvent<T>) => void, signal: AbortSignal): Promise<void>;
  requestCount(): { [verb: string]: number };
}

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  json: 'application/json-patch+json',
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
};

/** client-go re-reads token files once a minute; kubelet rotates projected tokens well before expiry. */
const TOKEN_REREAD_MS = 60_000;
/** A plain request that takes longer than this has failed; watches have no such limit (the informer's watchdog covers them). */
const REQUEST_TIMEOUT_MS = 60_000;
const DEFAULT_PAGE = 500;
/** HTTP/2: after this long without a frame the connection is PINGed (client-go: 30 s) ... */
const H2_IDLE_PING_MS = 30_000;
/** ... and closed when the PING is not answered within this (client-go: 15 s), failing its streams. */
const H2_PING_TIMEOUT_MS = 15_000;
/** An HTTP/2 connection not established (TCP + TLS) within this is closed, failing its pending streams. */
const H2_CONNECT_TIMEOUT_MS = 15_000;
/** How long the rest of a watch stream may take to end after an ERROR event before its connection is cut. */
const ERROR_DRAIN_MS = 1_000;
const DEFAULT_FIELD_MANAGER = 'multus-proxy';

interface Response {
  status: number;
  body: Buffer;
}

interface BodySink {
  write(chunk: Buffer): void;
}

/**
 * A list page parsed as it arrives: UTF-8 decoded across chunk boundaries, split into items
 * (list-items.ts), each parsed and transformed at once; the envelope is parsed at the end.
 */
class ItemSink<T> implements BodySink {
  readonly items: T[] = [];
  private readonly decoder = new StringDecoder('utf8');
  private readonly splitter = new ListItemSplitter();
  constructor(
    private readonly what: string,
    private readonly transform: ((item: T) => T) | undefined,
  ) {}
  write(chunk: Buffer): void {
    this.take(this.split(() => this.splitter.push(this.decoder.write(chunk))));
  }
  end(): { metadata?: { resourceVersion?: string; continue?: string } } {
    this.take(this.split(() => this.splitter.push(this.decoder.end())));
    return this.parse(
      this.split(() => this.splitter.end()),
      'list envelope',
    ) as { metadata?: { resourceVersion?: string; continue?: string } };
  }
  private split<R>(fn: () => R): R {
    try {
      return fn();
    } catch (e) {
      throw new Error(`${this.what}: ${(e as Error).message}`, { cause: e });
    }
  }
  private take(texts: readonly string[]): void {
    for (const text of texts) {
      const item = this.parse(text, 'list item') as T;
      this.items.push(this.transform === undefined ? item : this.transform(item));
    }
  }
  private parse(text: string, part: string): unknown {
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new Error(`${this.what}: the apiserver sent a ${part} that is not JSON (${(e as Error).message}): ${text.slice(0, 200)}`, { cause: e });
    }
  }
}

type Query = Record<string, string | number | boolean | undefined>;

function queryString(q: Query): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== '') params.set(k, String(v));
  const s = params.toString();
  return s ? `?${s}` : '';
}

function listQuery(opts: ListOptions): Query {
  return {
    labelSelector: opts.labelSelector,
    fieldSelector: opts.fieldSelector,
    limit: opts.limit,
    continue: opts.continue,
    resourceVersion: opts.resourceVersion,
  };
}

function writeQuery(opts: (WriteOptions & { force?: boolean }) | undefined, defaultManager: boolean): Query {
  return {
    dryRun: opts?.dryRun ? 'All' : undefined,
    fieldManager: opts?.fieldManager ?? (defaultManager ? DEFAULT_FIELD_MANAGER : undefined),
    force: opts?.force,
  };
}

/** Turns a non-2xx response (normally a metav1.Status) into a KubeApiError carrying the apiserver's words. */
export function errorFromResponse(status: number, body: string, what: string): KubeApiError {
  try {
    const s = JSON.parse(body) as { message?: unknown; reason?: unknown; details?: unknown; code?: unknown };
    const message = typeof s.message === 'string' ? s.message : body.slice(0, 500);
    return new KubeApiError(status, message, typeof s.reason === 'string' ? s.reason : undefined, s.details, what);
  } catch {
    return new KubeApiError(status, body.slice(0, 500) || http.STATUS_CODES[status] || 'error', undefined, undefined, what);
  }
}

/** A watch ERROR event's object is a Status; its `code` (410 after compaction) becomes the error status. */
export function errorFromWatchStatus(obj: unknown, what: string): KubeApiError {
  const s = (obj ?? {}) as { message?: unknown; reason?: unknown; details?: unknown; code?: unknown };
  const code = typeof s.code === 'number' ? s.code : 0;
  return new KubeApiError(code, typeof s.message === 'string' ? s.message : JSON.stringify(obj), typeof s.reason === 'string' ? s.reason : undefined, s.details, what);
}

function abortedError(method: string, path: string, signal: AbortSignal): Error {
  const why: unknown = signal.reason;
  return new Error(`${method} ${path.split('?')[0]}: aborted by the caller (${why instanceof Error ? why.message : String(why)})`, { cause: why });
}

/**
 * Splits a stream of text into complete lines; a partial line waits for the next chunk. Pure
 * so that chunk boundaries (mid-line, mid-event) can be tested without a server.
 */
export class LineSplitter {
  private rest = '';
  push(chunk: string): string[] {
    this.rest += chunk;
    const parts = this.rest.split('\n');
    this.rest = parts.pop() ?? '';
    return parts.filter((l) => l.trim() !== '');
  }
  /** What is left when the stream ends (a last line without a newline). */
  end(): string[] {
    const last = this.rest;
    this.rest = '';
    return last.trim() === '' ? [] : [last];
  }
}

/**
 * One HTTP/2 stream dressed as the part of http.ClientRequest the client uses (setTimeout, end,
 * destroy, 'response' with the stream as the response body, 'error'), so the request and watch
 * code is the same for both transports.
 */
class H2Request extends EventEmitter {
  constructor(private readonly stream: http2.ClientHttp2Stream) {
    super();
    stream.on('response', (headers) => {
      Object.assign(stream, { statusCode: Number(headers[':status']) });
      this.emit('response', stream);
    });
    stream.on('error', (e) => this.emit('error', e));
  }
  setTimeout(ms: number, onTimeout: () => void): void {
    this.stream.setTimeout(ms, onTimeout);
  }
  end(payload?: Buffer): void {
    this.stream.end(payload);
  }
  destroy(e?: Error): void {
    this.stream.destroy(e);
  }
}

/** Connections one client opens to the apiserver at most (watches included). */
export const MAX_SOCKETS = 64;

type Outgoing = Pick<http.ClientRequest, 'setTimeout' | 'end' | 'destroy' | 'on'>;

class Client implements KubeClient {
  private readonly base: URL;
  private readonly mod: typeof https | typeof http;
  private readonly agent: http.Agent;
  private readonly counts: { [verb: string]: number } = {};
  private token: string | undefined;
  private tokenReadAt = 0;
  private readonly exec: ExecCredentialSource | undefined;
  /** HTTP/2 (opt-in): the one connection every request and watch of this client shares. */
  private readonly useH2: boolean;
  private h2: http2.ClientHttp2Session | undefined;
  private h2Streams = 0;

  constructor(
    private readonly conn: KubeConnection,
    private readonly tokenRereadMs: number,
    http2Wanted = false,
  ) {
    this.base = new URL(conn.server);
    const secure = this.base.protocol === 'https:';
    this.mod = secure ? https : http;
    // Sockets are bounded: a burst of writes (Events, lookups) queues in the agent instead of
    // opening a TLS connection each. Each watch holds one socket for its life, so the bound is
    // well above the informers a program runs.
    this.agent = secure
      ? new https.Agent({
          keepAlive: true,
          maxSockets: MAX_SOCKETS,
          ...(conn.ca ? { ca: conn.ca } : {}),
          ...(conn.cert ? { cert: conn.cert } : {}),
          ...(conn.key ? { key: conn.key } : {}),
          rejectUnauthorized: !conn.insecureSkipTLSVerify,
        })
      : new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
    this.token = conn.token;
    this.exec = conn.exec ? new ExecCredentialSource(conn.exec) : undefined;
    this.useH2 = http2Wanted && secure;
  }

  /**
   * The shared HTTP/2 connection, opened when there is none (or it closed, failed or got
   * GOAWAY). A connection that is silent for H2_IDLE_PING_MS is PINGed and closed if the PING
   * is not answered: a dead connection must not keep every watch of the client hanging. It keeps
   * the process alive only while a stream is open, as keep-alive sockets do.
   */
  private session(): http2.ClientHttp2Session {
    const cur = this.h2;
    if (cur && !cur.closed && !cur.destroyed) return cur;
    const s = http2.connect(this.base.origin, {
      ...(this.conn.ca ? { ca: this.conn.ca } : {}),
      ...(this.conn.cert ? { cert: this.conn.cert } : {}),
      ...(this.conn.key ? { key: this.conn.key } : {}),
      rejectUnauthorized: !this.conn.insecureSkipTLSVerify,
    });
    const drop = (): void => {
      if (this.h2 === s) {
        this.h2 = undefined;
        this.h2Streams = 0;
      }
    };
    s.on('error', drop);
    s.on('close', drop);
    s.on('goaway', drop);
    // Streams opened before the connection is up wait for it, and no stream timeout runs meanwhile.
    const connecting = setTimeout(() => s.destroy(new Error(`HTTP/2 connection to ${this.base.origin}: not established within ${H2_CONNECT_TIMEOUT_MS} ms`)), H2_CONNECT_TIMEOUT_MS);
    connecting.unref();
    s.once('connect', () => clearTimeout(connecting));
    s.once('close', () => clearTimeout(connecting));
    s.setTimeout(H2_IDLE_PING_MS, () => {
      const dead = setTimeout(() => s.destroy(new Error(`HTTP/2 connection to ${this.base.origin}: no PING answer within ${H2_PING_TIMEOUT_MS} ms`)), H2_PING_TIMEOUT_MS);
      dead.unref();
      if (!s.ping(() => clearTimeout(dead))) clearTimeout(dead);
    });
    s.unref();
    this.h2 = s;
    return s;
  }

  private openH2(method: string, path: string, headers: Record<string, string>, token: string | undefined, signal?: AbortSignal): Outgoing {
    const s = this.session();
    const h: http2.OutgoingHttpHeaders = { ':method': method, ':path': path, accept: 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
    for (const [k, v] of Object.entries(headers)) h[k.toLowerCase()] = v;
    const stream = s.request(h, signal ? { signal } : {});
    if (this.h2Streams++ === 0) s.ref();
    stream.once('close', () => {
      if (this.h2 === s && --this.h2Streams === 0) s.unref();
    });
    return new H2Request(stream) as unknown as Outgoing;
  }

  /** Whether a 401 may be cured by fetching the credential again (a token file or an exec plugin). */
  private refreshable(): boolean {
    return this.exec !== undefined || this.conn.tokenFile !== undefined;
  }

  /** A 401: the token was rotated or expired under us; the next request reads it afresh. */
  private invalidate(): void {
    this.tokenReadAt = 0;
    this.exec?.invalidate();
  }

  requestCount(): { [verb: string]: number } {
    return { ...this.counts };
  }

  private count(verb: string): void {
    this.counts[verb] = (this.counts[verb] ?? 0) + 1;
  }

  private async bearer(): Promise<string | undefined> {
    if (this.exec) return this.exec.token();
    if (this.conn.tokenFile && Date.now() - this.tokenReadAt >= this.tokenRereadMs) {
      try {
        this.token = (await readFile(this.conn.tokenFile, 'utf8')).trim();
        this.tokenReadAt = Date.now();
      } catch (e) {
        // Keep the last good token: a rotation in progress must not break every request.
        if (this.token === undefined) throw new Error(`cannot read token file ${this.conn.tokenFile}: ${(e as Error).message}`, { cause: e });
      }
    }
    return this.token;
  }

  private async open(method: string, path: string, headers: Record<string, string>, signal?: AbortSignal): Promise<Outgoing> {
    const token = await this.bearer();
    const basePath = this.base.pathname.replace(/\/+$/, '');
    if (this.useH2) return this.openH2(method, basePath + path, headers, token, signal);
    return this.mod.request({
      protocol: this.base.protocol,
      hostname: this.base.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: this.base.port || (this.base.protocol === 'https:' ? 443 : 80),
      path: basePath + path,
      method,
      agent: this.agent,
      headers: { Accept: 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
      ...(signal ? { signal } : {}),
    });
  }

  /**
   * `sink`, if given, receives a 2xx response's body chunk by chunk (the returned body is then
   * empty); other responses are always collected, for their Status.
   */
  private async request(verb: string, method: string, path: string, body?: unknown, contentType?: string, signal?: AbortSignal, sink?: () => BodySink): Promise<Response> {
    // A request whose caller has already given up is not sent (nor counted).
    if (signal?.aborted) throw abortedError(method, path, signal);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = payload ? { 'Content-Type': contentType ?? 'application/json', 'Content-Length': String(payload.length) } : {};
    const first = await this.send(verb, method, path, headers, payload, signal, sink);
    // 401: a rotated projected token or an expired exec credential. Fetch it again and retry
    // once (nothing was done: the apiserver authenticates before anything else).
    if (first.status !== 401 || !this.refreshable()) return first;
    this.invalidate();
    return this.send(verb, method, path, headers, payload, signal, sink);
  }

  private async send(verb: string, method: string, path: string, headers: Record<string, string>, payload: Buffer | undefined, signal?: AbortSignal, sink?: () => BodySink): Promise<Response> {
    this.count(verb);
    const req = await this.open(method, path, headers, signal);
    return new Promise<Response>((resolve, reject) => {
      req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`${method} ${path}: no answer within ${REQUEST_TIMEOUT_MS} ms`)));
      req.on('error', (e) => reject(signal?.aborted ? abortedError(method, path, signal) : e));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        const into = sink !== undefined && status >= 200 && status < 300 ? sink() : undefined;
        res.on('data', (c: Buffer) => {
          if (into === undefined) chunks.push(c);
          else {
            try {
              into.write(c);
            } catch (e) {
              // Malformed body (or a transform that threw past the informer's guard): stop reading.
              req.destroy();
              reject(e instanceof Error ? e : new Error(String(e)));
            }
          }
        });
        res.on('error', reject);
        res.on('end', () => resolve({ status, body: Buffer.concat(chunks) }));
      });
      req.end(payload);
    });
  }

  private async json<T>(verb: string, method: string, path: string, body?: unknown, contentType?: string, signal?: AbortSignal): Promise<T> {
    const res = await this.request(verb, method, path, body, contentType, signal);
    const text = res.body.toString('utf8');
    if (res.status < 200 || res.status >= 300) throw errorFromResponse(res.status, text, `${method} ${path.split('?')[0]}`);
    return JSON.parse(text) as T;
  }

  get<T>(path: string, opts?: RequestOptions): Promise<T> {
    return this.json<T>('get', 'GET', path, undefined, undefined, opts?.signal);
  }

  async list<T>(path: string, opts: ListItemsOptions<T> = {}): Promise<ObjectList<T>> {
    const items: T[] = [];
    let resourceVersion: string | undefined;
    let cont = opts.continue;
    for (;;) {
      // A continue token carries its own snapshot; the apiserver refuses a resourceVersion beside it.
      const pagePath = path + queryString({ ...listQuery(opts), limit: opts.limit === 0 ? undefined : (opts.limit ?? DEFAULT_PAGE), continue: cont, ...(cont ? { resourceVersion: undefined } : {}) });
      const what = `GET ${path.split('?')[0]}`;
      let parsed: ItemSink<T> | undefined;
      // A fresh sink per attempt: a 401 retry starts from the first byte again.
      const res = await this.request('list', 'GET', pagePath, undefined, undefined, opts.signal, () => (parsed = new ItemSink<T>(what, opts.transform)));
      if (res.status < 200 || res.status >= 300 || parsed === undefined) throw errorFromResponse(res.status, res.body.toString('utf8'), what);
      const page = parsed.end();
      for (const item of parsed.items) items.push(item);
      resourceVersion ??= page.metadata?.resourceVersion;
      cont = page.metadata?.continue;
      if (!cont) break;
    }
    return { metadata: resourceVersion === undefined ? {} : { resourceVersion }, items };
  }

  create<T>(path: string, body: T, opts?: WriteOptions): Promise<T> {
    return this.json<T>('create', 'POST', path + queryString(writeQuery(opts, false)), body, undefined, opts?.signal);
  }

  replace<T>(path: string, body: T, opts?: WriteOptions): Promise<T> {
    return this.json<T>('update', 'PUT', path + queryString(writeQuery(opts, false)), body, undefined, opts?.signal);
  }

  patch<T>(path: string, patch: unknown, type: PatchType, opts?: WriteOptions & { force?: boolean }): Promise<T> {
    // Server-side apply needs a field manager; the others accept one.
    return this.json<T>('patch', 'PATCH', path + queryString(writeQuery(opts, type === 'apply')), patch, PATCH_CONTENT_TYPES[type], opts?.signal);
  }

  async delete(path: string, opts?: DeleteOptions): Promise<void> {
    const res = await this.request(
      'delete',
      'DELETE',
      path + queryString({ propagationPolicy: opts?.propagationPolicy, gracePeriodSeconds: opts?.gracePeriodSeconds }),
      undefined,
      undefined,
      opts?.signal,
    );
    if (res.status === 404 || (res.status >= 200 && res.status < 300)) return;
    throw errorFromResponse(res.status, res.body.toString('utf8'), `DELETE ${path}`);
  }

  async watch<T>(path: string, opts: WatchOptions, onEvent: (e: WatchEvent<T>) => void, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    this.count('watch');
    const what = `WATCH ${path}`;
    const q = queryString({
      ...listQuery(opts),
      limit: undefined,
      continue: undefined,
      watch: true,
      allowWatchBookmarks: opts.allowWatchBookmarks,
      timeoutSeconds: opts.timeoutSeconds,
    });
    const req = await this.open('GET', path + q, {}, signal);
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const finish = (e?: unknown): void => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        if (e === undefined) resolve();
        else reject(e instanceof Error ? e : new Error(`watch failed: ${JSON.stringify(e)}`));
      };
      // An abort is how callers stop a watch; it is not a failure.
      const onAbort = (): void => {
        req.destroy();
        finish();
      };
      signal.addEventListener('abort', onAbort);
      req.on('error', (e) => finish(signal.aborted ? undefined : e));
      req.on('response', (res) => {
        if (res.statusCode !== 200) {
          if (res.statusCode === 401) this.invalidate(); // the informer's retry reads the token afresh
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => finish(errorFromResponse(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'), what)));
          res.on('error', (e) => finish(e));
          return;
        }
        readWatchStream(res, req, what, onEvent, { settled: () => settled, finish, aborted: () => signal.aborted });
      });
      req.end();
    });
  }
}

/** How a watch's stream ends: once, with an error or without. */
interface WatchEnd {
  settled(): boolean;
  finish(e?: unknown): void;
  aborted(): boolean;
}

/**
 * A watch's 200 stream: its events delivered in order, line by line, until it ends; an ERROR event
 * fails the watch once the stream has ended.
 */
function readWatchStream<T>(res: http.IncomingMessage, req: Outgoing, what: string, onEvent: (e: WatchEvent<T>) => void, w: WatchEnd): void {
  res.setEncoding('utf8'); // decodes multi-byte characters split across chunks
  const lines = new LineSplitter();
  /** An ERROR event: the watch has failed, but its stream is read to the end first (below). */
  let failure: KubeApiError | undefined;
  const deliver = (batch: string[]): boolean => {
    for (const line of batch) {
      let ev: WatchEvent<T>;
      try {
        ev = JSON.parse(line) as WatchEvent<T>;
      } catch {
        w.finish(new Error(`${what}: unparsable watch event: ${line.slice(0, 200)}`));
        req.destroy();
        return false;
      }
      if (ev.type === 'ERROR') {
        // The apiserver ends the stream right after an ERROR (410 after a restart or a
        // compaction). Fail only when it has ended, so its connection is free again for the
        // relist that follows: a new one costs a TLS handshake, and after an apiserver
        // restart every informer of every sidecar relists.
        failure = errorFromWatchStatus(ev.object, what);
        const cut = setTimeout(() => req.destroy(), ERROR_DRAIN_MS);
        res.once('close', () => clearTimeout(cut));
        return false;
      }
      try {
        onEvent(ev);
      } catch (e) {
        w.finish(e);
        req.destroy();
        return false;
      }
    }
    return true;
  };
  res.on('data', (chunk: string) => {
    if (!w.settled() && !failure) deliver(lines.push(chunk));
  });
  res.on('end', () => {
    if (failure) w.finish(failure);
    else if (!w.settled() && deliver(lines.end())) w.finish();
  });
  res.on('error', (e) => w.finish(w.aborted() ? undefined : (failure ?? e)));
  res.on('close', () => {
    // A connection cut mid-stream (apiserver killed) ends without 'end'.
    if (!w.settled()) w.finish(w.aborted() ? undefined : (failure ?? new Error(`${what}: connection closed mid-stream`)));
  });
}

export interface ClientOptions {
  /** How often a tokenFile is re-read (default one minute). */
  tokenRereadMs?: number;
  /**
   * One HTTP/2 connection for every request and watch of this client (https only), as client-go
   * does, instead of one HTTP/1.1 connection per watch. Off by default; measured in bench B7.
   */
  http2?: boolean;
}

export function createKubeClient(conn: KubeConnection, opts: ClientOptions = {}): KubeClient {
  return new Client(conn, opts.tokenRereadMs ?? TOKEN_REREAD_MS, opts.http2 ?? false);
}
