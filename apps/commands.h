// apps/commands.h -- the razor CLI's subcommands, one file each in apps/.
#pragma once

#include <string>
#include <vector>

namespace razor::apps {

int run_demo(const std::vector<std::string>& args);
int run_data(const std::vector<std::string>& args);   // razor data fetch DATASET (apps/data_fetch.cpp)
int run_info(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_finetune(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_sparse_train(const std::vector<std::string>& args);

}  // namespace razor::apps
