// Builds against an installed minidet: one op and its backward (core, autograd, ops), and one PNG written
// (data, whose static library brings libpng along as a link dependency).
#include <cstdio>

#include "core/factories.h"
#include "data/image/image_io.h"
#include "data/image/plot.h"
#include "ops/elementwise/binary.h"
#include "ops/reduction/reduction.h"

int main(int argc, char** argv) {
  using namespace minidet;
  Tensor x = from_vector<double>({1.0, 2.0, 3.0});
  x.requires_grad_();
  const Tensor loss = sum(mul(x, x));  // d loss / dx = 2x
  loss.backward();
  std::printf("loss %.1f grad %.1f\n", loss.item<double>(), x.grad().to_vector<double>()[2]);
  if (argc > 1) {
    data::PlotSeries line{"x", {0.0, 1.0, 2.0}, x.to_vector<double>(), {0, 130, 200}};
    data::write_png(data::line_plot({line}), argv[1]);
  }
  return 0;
}
