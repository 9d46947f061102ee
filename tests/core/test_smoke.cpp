#include "core/factories.h"
#include "tests/support.h"
using namespace minidet;
TEST_CASE("values/tensor: smoke") { CHECK(zeros({2, 3}).numel() == 6); }
MINIDET_CUDA_TEST_CASE("cuda/tensor: smoke") { CHECK(zeros({2}, Device::cuda()).numel() == 2); }
