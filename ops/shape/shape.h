// Every differentiable shape op in one include: views (views.h), copies and conversions (copies.h),
// joining (cat.h).
#pragma once

#include "ops/shape/cat.h"
#include "ops/shape/copies.h"
#include "ops/shape/views.h"
