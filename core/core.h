// core/core.h -- everything in razor's core floor: tensor, autograd, saved-tensor seam, RNG, threads, ops.
#pragma once

#include "core/allocator.h"
#include "core/anomaly.h"
#include "core/autograd.h"
#include "core/check.h"
#include "core/isa.h"
#include "core/ops.h"   // generated: every core/ops/*.h
#include "core/rng.h"
#include "core/runtime.h"
#include "core/safetensors.h"
#include "core/saved.h"
#include "core/tape.h"
#include "core/tensor.h"
