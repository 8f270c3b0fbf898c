// Reference ids for the GPT-2 tests: npm gpt-3-encoder's own Encoder.js (fetched into data/gpt2 by
// scripts/setup.sh). Usage: node gpt2_js_ids.js DIR STRINGS.json -> a JSON array of id arrays.
const fs = require('fs');
const path = require('path');
const [dir, input] = process.argv.slice(2);
const { encode } = require(path.resolve(dir, 'Encoder.js'));
const strings = JSON.parse(fs.readFileSync(input, 'utf-8'));
process.stdout.write(JSON.stringify(strings.map((s) => encode(s))) + '\n');
