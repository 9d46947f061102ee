// A 5x7 bitmap font, drawn by hand for minidet, so boxes can carry class names and scores without a font
// library.
//
// Each glyph is 7 rows of 5 columns; glyph_rows(c)[row] has bit (4 - column) set where the pixel is ink.
// Letters are upper case only (lower case maps to them); characters without a glyph draw as '?'. Drawn
// text advances 6 columns per character (one blank column between glyphs) and is 7 rows tall.
#pragma once

#include <array>
#include <cstdint>

namespace minidet::data {

constexpr int kGlyphWidth = 5;
constexpr int kGlyphHeight = 7;
constexpr int kGlyphAdvance = kGlyphWidth + 1;

const std::array<uint8_t, kGlyphHeight>& glyph_rows(char c);

}  // namespace minidet::data
