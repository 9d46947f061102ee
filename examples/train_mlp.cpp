// train_mlp: the smallest end-to-end tour of minidet.
//
// A two-layer MLP (2 -> 64 -> 3) learns to separate three interleaved spirals in the plane, a problem no
// linear model can solve. Along the way it shows the three things minidet is for:
//   1. training: the loss falls and the accuracy climbs, on the CPU or a GPU (--device cuda);
//   2. studying backward: the backward trace of the first step prints every node in execution order with
//      the shapes, norms (and, for small tensors, values) of the gradients it receives and sends;
//   3. seeing the graph: the autograd graph of one step is written as Graphviz DOT (--dot FILE), and the
//      first step's backward pass as the backward explorer's page (--html FILE, when built with Graphviz):
//      open it in a browser and step through the nodes.
//
//   train_mlp [--device cpu|cuda] [--steps 400] [--seed 0] [--dot mlp_graph.dot] [--html mlp_step.html]
//             [--no-trace]
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "autograd/backward_html.h"
#include "autograd/dot.h"
#include "autograd/engine.h"
#include "autograd/scope.h"
#include "autograd/trace.h"
#include "core/cuda/availability.h"
#include "core/factories.h"
#include "nn/nn.h"
#include "ops/elementwise/compare.h"
#include "ops/loss/cross_entropy.h"
#include "ops/reduction/reduction.h"

using namespace minidet;

namespace {

// Three spirals: class c, point i has radius r = i/n and angle 4c + 4r (radians) plus noise.
void make_spirals(int64_t per_class, Generator& g, Tensor* points, Tensor* labels) {
  std::vector<float> xy;
  std::vector<int64_t> y;
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < per_class; ++i) {
      const double r = static_cast<double>(i) / static_cast<double>(per_class);
      const double angle = 4.0 * static_cast<double>(c) + 4.0 * r + 0.2 * g.next_normal();
      xy.push_back(static_cast<float>(r * std::sin(angle)));
      xy.push_back(static_cast<float>(r * std::cos(angle)));
      y.push_back(c);
    }
  }
  *points = from_vector<float>(xy, {3 * per_class, 2});
  *labels = from_vector<int64_t>(y);
}

double accuracy(const Tensor& logits, const Tensor& labels) {
  NoGradGuard no_grad;
  const std::vector<bool> hits = eq(argmax(logits, 1), labels).to_vector<bool>();
  int64_t correct = 0;
  for (bool hit : hits) correct += hit;
  return static_cast<double>(correct) / static_cast<double>(hits.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a 2-layer MLP on three spirals and show its backward pass"};
  std::string device_name = "cpu", dot_path = "mlp_graph.dot", html_path = "mlp_step.html";
  int64_t steps = 400;
  uint64_t seed = 0;
  bool no_trace = false;
  app.add_option("--device", device_name, "cpu, cuda or cuda:N");
  app.add_option("--steps", steps, "training steps (full batch)");
  app.add_option("--seed", seed, "seed for the data and the initial weights");
  app.add_option("--dot", dot_path, "where to write the autograd graph (Graphviz DOT)");
  app.add_option("--html", html_path, "where to write the backward explorer's page of step 0 (\"\": none)");
  app.add_flag("--no-trace", no_trace, "do not print the backward trace of the first step");
  CLI11_PARSE(app, argc, argv);

  try {
    const Device device = Device::parse(device_name);
    if (device.is_cuda() && !cuda::is_available()) {
      std::fprintf(stderr, "train_mlp: %s requested but no CUDA GPU is available\n", device_name.c_str());
      return 1;
    }
    Generator g(seed);
    Tensor points, labels;
    make_spirals(100, g, &points, &labels);
    points = points.to(device);
    labels = labels.to(device);

    nn::Sequential model;
    model.push_back(std::make_shared<nn::Linear>(2, 64, true, &g));
    model.push_back(std::make_shared<nn::ReLU>());
    model.push_back(std::make_shared<nn::Linear>(64, 3, true, &g));
    model.to(device);
    std::cout << "model:\n" << model << "data: " << points.size(0) << " points in 3 spirals, on " << device << "\n\n";

    nn::Adam optimizer({{model.parameters(), /*lr=*/0.01, /*weight_decay=*/0.0}});
    nn::WarmupCosineLR schedule(optimizer, steps, /*min_factor=*/0.05);
    for (size_t i = 0; i < model.named_parameters().size(); ++i)
      autograd::set_name(model.named_parameters()[i].second, model.named_parameters()[i].first);

    if (!html_path.empty() && !autograd::backward_html_available())
      std::cout << "no backward explorer page: this build has no Graphviz (apt-get install libgraphviz-dev)\n";
    const auto start = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < steps; ++step) {
      optimizer.zero_grad();
      const bool explore = step == 0 && !html_path.empty() && autograd::backward_html_available();
      std::optional<autograd::ScopeRecordingGuard> scopes;  // the page groups nodes by layer ("0", "2")
      if (explore) scopes.emplace();
      Tensor logits = model(points);
      Tensor loss = cross_entropy(logits, labels);
      scopes.reset();
      std::optional<autograd::BackwardRecorder> recorder;
      if (explore) {
        autograd::set_name(loss, "cross-entropy loss");
        autograd::RecordOptions options;
        options.title = "train_mlp: step 0 of a 2-64-3 MLP on three spirals";
        recorder.emplace(options);
      }
      if (step == 0) {
        std::ofstream(dot_path) << autograd::to_dot({loss});
        std::cout << "autograd graph of one step written to " << dot_path << " (dot -Tpng " << dot_path
                  << " -o graph.png)\n";
      }
      if (step == 0 && !no_trace) {
        std::cout << "\nbackward trace of step 0:\n";
        autograd::BackwardTraceGuard trace(std::cout);
        loss.backward();
        std::cout << "\n";
      } else {
        loss.backward();
      }
      if (recorder) {
        autograd::write_backward_html(recorder->take(), html_path);
        std::cout << "backward explorer of step 0 written to " << html_path << " (open it in a browser)\n\n";
        recorder.reset();
      }
      optimizer.step();
      schedule.step();
      if (step % 50 == 0 || step == steps - 1) {
        std::printf("step %4lld  loss %.4f  accuracy %5.1f%%  lr %.5f\n", static_cast<long long>(step),
                    loss.item<double>(), 100.0 * accuracy(logits, labels), schedule.lr());
      }
    }
    cuda::synchronize();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    NoGradGuard no_grad;
    const double final_accuracy = accuracy(model.forward(points), labels);
    std::printf("\ntrained %lld steps in %.2f s (%.2f ms/step); final accuracy %.1f%%\n",
                static_cast<long long>(steps), seconds, 1e3 * seconds / static_cast<double>(steps),
                100.0 * final_accuracy);
    return final_accuracy > 0.9 ? 0 : 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
}
