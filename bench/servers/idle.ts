/** B5's reference: a TypeScript program that does nothing, run under tsx like the sidecar without a bundle. */
setInterval(() => undefined, 1 << 30);
