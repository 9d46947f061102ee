// What the backward explorer page is made of, compiled into the library at build time by embed.cmake, so
// a program writes the page without looking for files at run time. Internal to autograd.
#pragma once

#include <map>
#include <string>

namespace minidet::autograd::explorer {

// explorer.html with its {{placeholders}}, explorer.css, and the script: explorer_views.js then explorer.js,
// as written in autograd/explorer/.
const std::string& page_template();
const std::string& page_css();
const std::string& page_js();

// The comment block that opens each op header (the op's math), keyed by the header's path from the
// repository root ("ops/roi_align/roi_align.h"). Headers that open with code have no entry.
const std::map<std::string, std::string>& op_header_docs();

}  // namespace minidet::autograd::explorer
