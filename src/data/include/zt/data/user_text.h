#pragma once
// Note [your own text]: `prepare --input` reads plain-text files (each one document), folders of
// them (recursively, in byte order of their paths, hidden names skipped) and JSON lines files
// (*.jsonl: each non-blank line one JSON object, the document its string field `text_key`). Input
// must be UTF-8 text: an empty file, a compressed or binary one (a NUL byte), invalid UTF-8, a
// JSON line that is not valid JSON (the parser's reason and column), or not an object with that
// string field, or a folder without files is one data error naming the file and the byte offset
// (and the line); inside a folder such files are left out and counted instead (a folder of
// documentation holds compressed files), as are FIFOs, sockets and devices, and links to folders
// are not followed (said in one line). What cannot be read at all, a folder or a file, named or
// under a folder (no permission, a dangling link, a link loop), is an error naming it with the
// system's reason: never left out unsaid. Each file and folder is read once, known by its device
// and inode (links resolved): the same --input twice, a folder and a file in it, or a link beside
// its target is one document, not one in train and its copy in validation; each such skip is said.
// Prepare's own output (--out and its temporaries "<out>.tmp.*") is never read: left out of a
// folder that holds it (a second run over the same folder), an error when named.
// Documents are never split across train and validation except a lone one (Note [held-out
// documents] in prepare.h).
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "zt/data/corpus.h"

namespace zt::data {

// The documents in one input's bytes; `name` names it in errors and document names
// ("notes.txt", "posts.jsonl:12"). jsonl: one document per non-blank line.
std::vector<Document> parse_text_input(const std::string& name, std::string_view bytes, bool jsonl,
                                       const std::string& text_key = "text");

// Every document under `paths` (files, or folders read recursively), in order; a file is JSON
// lines when its name ends in .jsonl. `progress` hears about long inputs and what was left out.
// Nothing at or under `out_dir` (prepare's output) or its temporaries beside it is read.
std::vector<Document> read_text_inputs(const std::vector<std::string>& paths, const std::string& text_key = "text",
                                       const std::function<void(const std::string&)>& progress = {},
                                       const std::string& out_dir = {});

}  // namespace zt::data
