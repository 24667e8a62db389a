// trident's Open MPI defaults (comm/mpi_tuning.hpp) reach Open MPI, a user's own value wins, and
// the non-blocking all-reduce still sums exactly with the chosen algorithm, in place, on any
// group size (ctest runs this on 2 and 3 ranks, and once with the user's value, Rabenseifner,
// exported).
// Own main: the defaults must be applied before MPI_Init, as trident run does.
#include <mpi.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "comm/mpi_tuning.hpp"

namespace {

const char* const kVariable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
std::optional<std::string> user_value;  // the environment's value before the defaults were applied
std::vector<trident::MpiSetting> applied;

// The value Open MPI itself holds for an integer MCA parameter, through the MPI tool interface.
int open_mpi_parameter(const char* name) {
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) {
    ADD_FAILURE() << "Open MPI has no control variable " << name;
    return -1;
  }
  MPI_T_cvar_handle handle;
  int count = 0;
  EXPECT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
  int value = -1;
  EXPECT_EQ(MPI_T_cvar_read(handle, &value), MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  return value;
}

TEST(MpiTuning, TheSettingReachesOpenMpiAndTheUsersValueWins) {
  ASSERT_EQ(applied.size(), 1u);
  const trident::MpiSetting& setting = applied[0];
  EXPECT_EQ(setting.variable, kVariable);
  EXPECT_EQ(setting.from_user, user_value.has_value());
  const std::string expected = user_value.value_or("1");
  EXPECT_EQ(setting.value, expected);
  const char* environment = std::getenv(kVariable);
  ASSERT_NE(environment, nullptr);
  EXPECT_EQ(std::string(environment), expected);
  EXPECT_EQ(open_mpi_parameter("coll_libnbc_iallreduce_algorithm"), std::stoi(expected));
}

TEST(MpiTuning, TheBannerNamesTheAlgorithmAndWhoChoseIt) {
  const std::string text = trident::describe_mpi(applied);
  EXPECT_EQ(text.rfind("Open MPI v", 0), 0u) << text;
  const std::string who = user_value ? "your " : "trident's default ";
  EXPECT_NE(text.find("non-blocking all-reduce: " + std::string(user_value ? "Rabenseifner" : "ring") + " (" + who +
                      kVariable + "="),
            std::string::npos)
      << text;
}

TEST(MpiTuning, InPlaceIallreduceSumsExactly) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Large enough for the segmented algorithms, odd so that the pieces are unequal; integers stay
  // exact in float, so any lost or doubled piece shows.
  const int count = 786433;
  std::vector<float> data(count);
  for (int i = 0; i < count; ++i) data[i] = static_cast<float>((i % 1000) * (rank + 1));
  MPI_Request request;
  ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&request, MPI_STATUS_IGNORE), MPI_SUCCESS);
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  int wrong = 0;
  for (int i = 0; i < count; ++i) wrong += data[i] != static_cast<float>(i % 1000) * ranks_sum;
  EXPECT_EQ(wrong, 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* value = std::getenv(kVariable)) user_value = value;
  applied = trident::apply_mpi_tuning_defaults();
  MPI_Init(&argc, &argv);
  int provided = 0;
  MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_T_finalize();
  MPI_Finalize();
  return failed;
}
