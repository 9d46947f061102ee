#include "core/device.h"

#include "core/error.h"

namespace minidet {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string ordinal = text.substr(5);
    bool digits = !ordinal.empty() && ordinal.size() < 4;
    for (char c : ordinal) digits = digits && c >= '0' && c <= '9';
    MINIDET_CHECK(digits, "Device::parse: bad GPU ordinal in '", text, "' (expected cuda:N)");
    return cuda(std::stoi(ordinal));
  }
  MINIDET_FAIL("Device::parse: unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& out, const Device& device) { return out << device.str(); }

}  // namespace minidet
