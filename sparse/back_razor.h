// sparse/back_razor.h -- everything Back Razor in one include: masker, codecs, the save policy.
// docs: docs/back-razor.md.
#pragma once

#include "sparse/channel_int8.h"
#include "sparse/dense_coded.h"
#include "sparse/fp16.h"
#include "sparse/gelu_code.h"
#include "sparse/masker.h"
#include "sparse/razor_policy.h"
#include "sparse/razored_tensor.h"
