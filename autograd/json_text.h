// A string as a JSON string literal, quotes included: what the backward record (backward_record.cpp) and the
// explorer page's docs (backward_html.cpp) write by hand. Internal to autograd.
#pragma once

#include <cstdio>
#include <string>

namespace minidet::autograd {

inline std::string json_quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
          out += buffer;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace minidet::autograd
