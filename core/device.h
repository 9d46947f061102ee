// Where a tensor's memory lives: the host ("cpu") or one GPU ("cuda:N").
#pragma once

#include <ostream>
#include <string>

namespace minidet {

enum class DeviceType : int8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // the GPU ordinal; always 0 for the CPU

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  static Device parse(const std::string& text);  // "cpu", "cuda", "cuda:1"

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;

  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

std::ostream& operator<<(std::ostream& out, const Device& device);

}  // namespace minidet
