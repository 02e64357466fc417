#!/usr/bin/env node
// Prints the checksum test vectors that crates/model/tests/checksum_vectors.rs pins.
//
//   node scripts/checksum-vectors.mjs > crates/model/tests/data/checksum-vectors.json
//
// The checksum is @nhtio/adk's `sha256(canonicalStringify({ tool, args }))`. `canonicalStringify`
// below has the same semantics as the ADK's (NHTIO/ADK, src/lib/utils/canonical_json.ts):
// scalars through JSON.stringify, arrays in order, object keys sorted with the default
// Array.prototype.sort() comparator (UTF-16 code units), no whitespace. Everything runs on real
// JavaScript values produced by JSON.parse, so number rounding, number printing, string escaping and
// key order are JavaScript's own. No dependencies; output is deterministic.

import { createHash } from 'node:crypto'

/** Canonical JSON text with the ADK's semantics (including `undefined` printing as `undefined`). */
function canonicalStringify(value) {
  if (value === null || typeof value !== 'object') {
    return JSON.stringify(value)
  }
  if (Array.isArray(value)) {
    return '[' + value.map((item) => canonicalStringify(item)).join(',') + ']'
  }
  const members = []
  for (const key of Object.keys(value).sort()) {
    // String concatenation: an `undefined` member value prints as the word `undefined`, as in the ADK.
    members.push(JSON.stringify(key) + ':' + canonicalStringify(value[key]))
  }
  return '{' + members.join(',') + '}'
}

/**
 * The args of a v1 event, as the checksum sees them: the wire text parsed with JSON.parse, a
 * string kept as the string it is (as the ADK's `Tool.executor` hashes a string argument); absent
 * args stay `undefined`.
 */
function argsFromWire(argsJson) {
  if (argsJson === null) return undefined
  return JSON.parse(argsJson)
}

/**
 * The args of a format that encodes them as JSON text in a string (OpenAI `function.arguments`):
 * the value the string holds when it is JSON (the ADK's OpenAI battery parses it before hashing),
 * else the string itself.
 */
function argsFromEncoded(encoded) {
  try {
    return JSON.parse(encoded)
  } catch {
    return encoded
  }
}

const sha256Hex = (text) => createHash('sha256').update(text, 'utf8').digest('hex')

// Each case: the tool name and the exact JSON text of `args` as it travels in an event
// (null: the event has no args).
const cases = [
  ['simple_object', 'get_weather', '{"location":"San Francisco, CA","unit":"celsius"}'],
  ['simple_object_keys_reversed', 'get_weather', '{"unit":"celsius","location":"San Francisco, CA"}'],
  ['nested_objects_and_arrays', 'query', '{"z":[3,{"b":2,"a":1},[[]],[{}],[[1,[2,[3]]]]],"a":{"y":{"x":null,"w":[true,false]}}}'],
  ['deep_nesting', 'deep', '{"l1":{"l2":{"l3":{"l4":{"l5":{"l6":{"l7":{"l8":{"l9":{"l10":[[[[["bottom"]]]]]}}}}}}}}}}'],
  ['whitespace_in_wire_text', 'ws', ' {\n  "b" : [ 1 , 2 ] ,\n\t"a" : { }\r\n} '],
  ['empty_object', 'noop', '{}'],
  ['empty_array', 'noop', '[]'],
  ['null_args', 'noop', 'null'],
  ['true_args', 'flag', 'true'],
  ['false_args', 'flag', 'false'],
  ['number_args', 'count', '42'],
  ['booleans_and_nulls_in_object', 'flags', '{"on":true,"off":false,"none":null}'],
  ['key_sort_ascii', 'keys', '{"b":1,"a":2,"B":3,"A":4,"_":5,"~":6," ":7,"":8,"aa":9,"a0":10,"a ":11}'],
  ['key_sort_integer_like', 'keys', '{"10":"a","9":"b","1":"c","01":"d","-1":"e","1.5":"f","2":"g"}'],
  ['key_sort_prefixes', 'keys', '{"abc":1,"ab":2,"a":3,"abcd":4,"a\\u0000":5}'],
  ['keys_bmp_vs_astral_escaped', 'unicode', '{"\\uFB01":1,"\\uD83D\\uDE00":2,"a":3,"\\u00E9":4,"\\uFFFF":5,"\\uE000":6,"\\uD7FF":7,"\\uD800\\uDC00":8,"\\uDBFF\\uDFFF":9}'],
  ['keys_bmp_vs_astral_raw_utf8', 'unicode', '{"ﬁ":"fi ligature","😀":"grinning","𝄞":"g clef","中":"cjk","é":"e acute","e\u0301":"e + combining acute","\uFF21":"fullwidth A"}'],
  ['nested_astral_keys', 'unicode', '[{"\\uFB01":{"\\uD83D\\uDE00":1,"\\uFFFD":2}},{"x\\uD83D\\uDE00":1,"x\\uFB01":2,"x":3}]'],
  ['unicode_values', 'unicode', '{"text":"日本語 😀 ﬁ \\u00e9 e\\u0301 \\uD834\\uDD1E","emoji":"👩‍👩‍👧"}'],
  ['control_characters', 'ctl', '{"s":"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u001b\\u001f\\u0020\\u007f\\u0080\\u009f"}'],
  ['control_characters_in_keys', 'ctl', '{"\\n":1,"\\t":2,"\\u0000":3,"\\u001f":4,"\\"":5,"\\\\":6}'],
  ['quotes_backslashes_separators', 'str', '{"q":"say \\"hi\\"","bs":"C:\\\\path\\\\to","slash":"a\\/b</script>","ls":"line\\u2028sep","ps":"para\\u2029sep","raw_ls":"\u2028\u2029"}'],
  ['number_one_point_zero', 'num', '{"n":1.0,"m":-1.0,"z":0.0}'],
  ['number_exponents', 'num', '{"a":1e21,"b":1e-7,"c":1E2,"d":1e+2,"e":2.5e-8,"f":1e20,"g":100000000000000000000,"h":1000000000000000000000,"i":1e-6,"j":0.000001,"k":123e-20}'],
  ['number_negative_zero', 'num', '{"a":-0,"b":-0.0,"c":-0e10,"d":[-0]}'],
  ['number_point_one_plus_point_two', 'num', '{"sum":0.30000000000000004,"a":0.1,"b":0.2,"c":4.35,"d":123.456}'],
  ['number_big_integers', 'num', '{"max_safe":9007199254740991,"two_53":9007199254740992,"two_53_plus_1":9007199254740993,"neg":-9007199254740993,"u64ish":12345678901234567890,"u64_max":18446744073709551615,"i64_min":-9223372036854775808,"beyond_u64":123456789012345678901234567890}'],
  ['number_extremes', 'num', '{"min_subnormal":5e-324,"min_normal":2.2250738585072014e-308,"max":1.7976931348623157e308,"tiny":1.5e-300,"huge":-1.5e300,"epsilon":2.220446049250313e-16}'],
  ['number_integers_as_floats', 'num', '[0,1,-1,10,100,1.5,-1.5,1e15,1e16,1e17,123456789012,0.5e1,50e-1]'],
  ['args_json_string_openai_style', 'get_weather', '"{\\"unit\\":\\"celsius\\",\\"location\\":\\"San Francisco, CA\\"}"'],
  ['args_json_string_with_numbers', 'num', '"{\\"n\\":1.0,\\"big\\":9007199254740993,\\"e\\":1e21}"'],
  ['args_json_string_array', 'list', '"[3,1,2]"'],
  ['args_json_string_scalar', 'count', '"42"'],
  ['args_json_string_null', 'noop', '"null"'],
  ['args_json_string_of_string', 'str', '"\\"inner\\""'],
  ['args_string_not_json', 'echo', '"hello world"'],
  ['args_string_broken_json', 'echo', '"{\\"a\\":1"'],
  ['args_string_empty', 'echo', '""'],
  ['args_string_with_escapes', 'echo', '"tab\\there \\"quoted\\" \\\\ \\u2028 \\u0001"'],
  ['args_absent', 'no_args', null],
  ['duplicate_keys_last_wins', 'dup', '{"a":1,"b":2,"a":3}'],
  ['proto_key', 'proto', '{"__proto__":{"x":1},"constructor":2,"a":3}'],
  ['tool_name_needs_escaping', 'ツール "quoted" \\ name\n', '{"a":1}'],
  ['realistic_tool_call', 'read_file', '{"path":"/src/main.rs","options":{"encoding":"utf-8","range":{"start":10,"end":20},"follow_symlinks":true},"tags":["rust","src"],"limit":1.5e3}'],
]

const vectors = cases.flatMap(([name, tool, argsJson]) => {
  const args = argsFromWire(argsJson)
  const canonical = canonicalStringify({ tool, args })
  const out = [{ name, rule: 'value', tool, args_json: argsJson, canonical, checksum: sha256Hex(canonical) }]
  if (typeof args === 'string') {
    // The same string as an encoded `arguments` text (what the openai, codex and otel adapters hash).
    const encoded = canonicalStringify({ tool, args: argsFromEncoded(args) })
    out.push({ name: `${name}_encoded`, rule: 'encoded', tool, args_json: argsJson, canonical: encoded, checksum: sha256Hex(encoded) })
  }
  return out
})

process.stdout.write(JSON.stringify(vectors, null, 2) + '\n')
