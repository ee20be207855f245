#include "util/suggest.hpp"

#include <algorithm>

namespace pitfall::runner {

std::size_t edit_distance(const std::string& a, const std::string& b) {
    // d[i][j]: the distance of a's first i letters to b's first j ("optimal string alignment":
    // a swap of two neighbours, the commonest typo, counts one).
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i)
        d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j)
        d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + change});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

std::string nearest_name(const std::string& word, const std::vector<std::string>& known) {
    if (word.empty())
        return "";
    // What people call the CUDA backend: "gpu" is one letter from "cpu", the opposite of meant.
    for (const char* alias : {"gpu", "nvidia", "device"})
        if (word == alias && std::find(known.begin(), known.end(), "cuda") != known.end())
            return "cuda";
    // "--samp" for "--samples", "float64" for "float64_inputs": a start of three letters or more.
    const std::size_t letters = word.size() - std::min(word.find_first_not_of('-'), word.size());
    if (letters >= 3)
        for (const auto& name : known)
            if (name.size() > word.size() && name.compare(0, word.size(), word) == 0)
                return name;
    const std::size_t limit = std::max<std::size_t>(1, letters / 3);
    std::string best;
    std::size_t best_distance = limit + 1;
    for (const auto& name : known) {
        const std::size_t d = edit_distance(word, name);
        if (d < best_distance) {
            best = name;
            best_distance = d;
        }
    }
    return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& known) {
    const std::string name = nearest_name(word, known);
    return name.empty() ? "" : " (did you mean '" + name + "'?)";
}

} // namespace pitfall::runner
