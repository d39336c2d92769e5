/**
 * A metav1.LabelSelector of a MultiNetworkPolicy (`matchLabels` and `matchExpressions` with In,
 * NotIn, Exists, DoesNotExist) checked as Kubernetes checks it and turned into the selector of
 * annotations/label-selector.ts, whose matching has Kubernetes' semantics. Linear in the selector;
 * bounded by POLICY_BUDGETS. Pure.
 */
import { selectorFromMap, type LabelSelector as ParsedSelector, type Operator, type Requirement } from '../annotations/label-selector.js';
import { checkLabelKey, checkLabelValue, LABEL_KEY_RULE, LABEL_VALUE_RULE } from '../annotations/names.js';
import { isJsonObject, jsonKind, ownField } from '../annotations/json.js';
import { POLICY_BUDGETS } from '../object-budgets.js';
import { err, inputError, ok, type InputError, type Result } from '../result.js';

export type { ParsedSelector };

const OPERATORS: readonly Operator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];
const SHAPE = 'write a label selector such as {matchLabels: {app: web}} or {matchExpressions: [{key: tier, operator: In, values: [db]}]}';

/** The bad value as a message shows it (formatInputError quotes it once). */
export const show = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v)));

/** `{}` (and absent, where the caller allows it) selects everything. */
export function readSelector(raw: unknown, key: string): Result<ParsedSelector, InputError> {
  if (!isJsonObject(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not a label selector object`, SHAPE));
  const labels = ownField(raw, 'matchLabels');
  const exprs = ownField(raw, 'matchExpressions');
  if (labels !== undefined && labels !== null && !isJsonObject(labels))
    return err(inputError(`${key}.matchLabels`, show(labels), `is ${jsonKind(labels)}, not a map of label keys to values`, 'write matchLabels: {app: web}'));
  if (exprs !== undefined && exprs !== null && !Array.isArray(exprs))
    return err(inputError(`${key}.matchExpressions`, show(exprs), `is ${jsonKind(exprs)}, not a list`, 'write matchExpressions: [{key: tier, operator: In, values: [db]}]'));
  const pairs = isJsonObject(labels) ? Object.entries(labels) : [];
  const list: unknown[] = Array.isArray(exprs) ? exprs : [];
  const terms = pairs.length + list.length;
  if (terms > POLICY_BUDGETS.selectorTerms) {
    return err(
      inputError(
        key,
        `${terms} terms`,
        `has ${terms} matchLabels pairs and matchExpressions, more than the ${POLICY_BUDGETS.selectorTerms} multus-proxy matches in one selector`,
        'use fewer terms, e.g. one label that the selected pods share',
      ),
    );
  }
  const map: Record<string, string> = {};
  for (const [k, v] of pairs) {
    const keyWhy = checkLabelKey(k);
    if (keyWhy !== undefined) return err(inputError(`${key}.matchLabels`, k, `the label key ${keyWhy}`, `a label key is ${LABEL_KEY_RULE}`));
    if (typeof v !== 'string') return err(inputError(`${key}.matchLabels.${k}`, show(v), `is ${jsonKind(v)}, not a string`, 'quote the value, e.g. "true" or "1"'));
    const valueWhy = checkLabelValue(v);
    if (valueWhy !== undefined) return err(inputError(`${key}.matchLabels.${k}`, v, `the label value ${valueWhy}`, `a label value is ${LABEL_VALUE_RULE}`));
    map[k] = v;
  }
  const requirements: Requirement[] = [...selectorFromMap(map).requirements];
  for (const [i, e] of list.entries()) {
    const r = readRequirement(e, `${key}.matchExpressions[${i}]`);
    if (!r.ok) return r;
    requirements.push(r.value);
  }
  return ok({ requirements });
}

function readRequirement(raw: unknown, key: string): Result<Requirement, InputError> {
  const example = 'write {key: tier, operator: In, values: [db]}, or {key: canary, operator: DoesNotExist}';
  if (!isJsonObject(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not a requirement object`, example));
  const k = ownField(raw, 'key');
  if (typeof k !== 'string') return err(inputError(`${key}.key`, show(k), 'is missing or not a string', example));
  const keyWhy = checkLabelKey(k);
  if (keyWhy !== undefined) return err(inputError(`${key}.key`, k, `the label key ${keyWhy}`, `a label key is ${LABEL_KEY_RULE}`));
  const operator = ownField(raw, 'operator');
  if (typeof operator !== 'string' || !OPERATORS.includes(operator as Operator)) {
    return err(inputError(`${key}.operator`, show(operator), 'is not one of In, NotIn, Exists, DoesNotExist (the spelling is case-sensitive)', 'write one of In, NotIn, Exists, DoesNotExist'));
  }
  const op = operator as Operator;
  const rawValues = ownField(raw, 'values') ?? [];
  if (!Array.isArray(rawValues)) return err(inputError(`${key}.values`, show(rawValues), `is ${jsonKind(rawValues)}, not a list of strings`, 'write values: [a, b]'));
  const set = op === 'In' || op === 'NotIn';
  if (set && rawValues.length === 0)
    return err(
      inputError(
        `${key}.values`,
        '[]',
        `is empty, and operator ${op} needs at least one value`,
        `list the values, or use operator ${op === 'In' ? 'DoesNotExist' : 'Exists'} to match on the key alone`,
      ),
    );
  if (!set && rawValues.length > 0) return err(inputError(`${key}.values`, show(rawValues), `must be empty with operator ${op}`, `remove values, or use operator ${op === 'Exists' ? 'In' : 'NotIn'}`));
  if (rawValues.length > POLICY_BUDGETS.selectorValues) {
    return err(
      inputError(
        `${key}.values`,
        `${rawValues.length} values`,
        `lists more than the ${POLICY_BUDGETS.selectorValues} values multus-proxy matches in one expression`,
        'select on a label the pods share instead of listing many values',
      ),
    );
  }
  const values: string[] = [];
  for (const [i, v] of rawValues.entries()) {
    if (typeof v !== 'string') return err(inputError(`${key}.values[${i}]`, show(v), `is ${jsonKind(v)}, not a string`, 'quote the value'));
    const why = checkLabelValue(v);
    if (why !== undefined) return err(inputError(`${key}.values[${i}]`, v, `the label value ${why}`, `a label value is ${LABEL_VALUE_RULE}`));
    values.push(v);
  }
  return ok({ key: k, operator: op, values: [...new Set(values)] });
}
