// The nearest known name offered for a typo.
#include "util/suggest.hpp"

#include <gtest/gtest.h>

using pitfall::runner::nearest_name;

TEST(Suggest, TyposAndWhatPeopleCallTheCudaBackend) {
    const std::vector<std::string> backends{"cpu", "cuda"};
    EXPECT_EQ(nearest_name("gpu", backends), "cuda"); // not "cpu", one letter away
    EXPECT_EQ(nearest_name("nvidia", backends), "cuda");
    EXPECT_EQ(nearest_name("cdua", backends), "cuda");
    EXPECT_EQ(nearest_name("cp", backends), "cpu");
    EXPECT_EQ(nearest_name("gpu", {"cpu"}), "cpu"); // no CUDA to offer: the nearest
}
