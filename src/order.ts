/**
 * Plain code-point order for strings. Locale-independent (unlike localeCompare, whose result
 * depends on the ICU data and locale of the machine), so two machines sort, render and compare
 * the same text the same way.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
