// Reference ids for the Llama 3 tests: npm llama3-tokenizer-js's own encoder (its bundle, fetched
// into data/llama3 by scripts/setup.sh), without <|begin_of_text|> or <|end_of_text|> added.
// Usage: node llama3_js_ids.js DIR STRINGS.json -> a JSON array of id arrays.
const fs = require('fs');
const path = require('path');
const [dir, input] = process.argv.slice(2);
const { llama3Tokenizer } = require(path.resolve(dir, 'commonjs-llama3-tokenizer-with-baked-data.cjs'));
const strings = JSON.parse(fs.readFileSync(input, 'utf-8'));
process.stdout.write(JSON.stringify(strings.map((s) => llama3Tokenizer.encode(s, { bos: false, eos: false }))) + '\n');
