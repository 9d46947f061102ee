// Everything in nn/: modules, layers, initialisers, optimizers, schedules, checkpoints.
#pragma once

#include "nn/checkpoint/checkpoint.h"
#include "nn/init/init.h"
#include "nn/layers/batch_norm.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/deform_conv2d.h"
#include "nn/layers/linear.h"
#include "nn/layers/sequential.h"
#include "nn/layers/simple.h"
#include "nn/module/module.h"
#include "nn/optim/adam.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/sgd.h"
