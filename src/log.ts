/**
 * JSON logging with pino. The level comes from LOG_LEVEL (default info) so the webhook can pass
 * its configured level to the sidecar through the environment.
 */
import pino from 'pino';

export type Logger = pino.Logger;

const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

export function createLogger(component: string, level: string | undefined = process.env['LOG_LEVEL']): Logger {
  const chosen = level !== undefined && LEVELS.has(level) ? level : 'info';
  return pino({ name: component, level: chosen, base: { component } });
}
