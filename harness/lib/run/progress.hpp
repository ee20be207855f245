// The terminal's view of a run, private to harness/lib/run (execute.cpp).
#pragma once

#include "run/run_plan.hpp"

#include <iomanip>
#include <iostream>
#include <sstream>

namespace pitfall::runner::run_parts {

/// The terminal's view of a run: each case once, on one line, with a counter and an ETA
/// ("[ 7/78] cpu.dtype_casting.remedy_loss_scaling   PASS   0.4 s   ETA 0:31"). One case at a
/// time, its name shows while it runs; with --jobs, each line is written whole as its case
/// ends (lines of cases running side by side would interleave).
class progress {
public:
    progress(const std::vector<case_ref>& cases, const std::map<std::string, case_record>& done,
             int jobs)
        : m_total(cases.size()), m_jobs(jobs) {
        for (const auto& c : cases) {
            m_width = std::max(m_width, c.key().size() + 2);
            m_left += done.count(c.key()) == 0 ? 1 : 0;
        }
    }

    void begin(std::size_t index, const case_key& key) {
        if (m_jobs == 1)
            std::cout << head(index, key) << std::flush;
    }
    /// A case whose timing came out uncertain: it is measured again at the end of the run.
    void deferred(std::size_t index, const case_key& key, verdict_kind v, double took) {
        std::ostringstream line;
        line << (m_jobs == 1 ? "" : head(index, key)) << std::left << std::setw(16)
             << (std::string(to_string(v)) + "?") << std::right << std::fixed
             << std::setprecision(1) << std::setw(6) << took
             << " s   measured again at the end of the run\n";
        std::cout << line.str() << std::flush;
        m_spent += took;
        m_again_estimate.push_back(3 * took); // three times the samples, alone
    }
    /// The second processes of the deferred cases: counted apart ("[again 1/3]"), never with
    /// the first pass's counter, and an ETA from what their first processes took.
    void begin_again(std::size_t k, const case_key& key) {
        if (m_jobs == 1)
            std::cout << again_head(k, key) << std::flush;
    }
    void end_again(std::size_t k, const case_record& record, double took) {
        double left = 0;
        for (std::size_t j = k + 1; j < m_again_estimate.size(); ++j)
            left += m_again_estimate[j];
        std::ostringstream line;
        line << (m_jobs == 1 ? "" : again_head(k, record.key)) << std::left << std::setw(16)
             << to_string(record.verdict) << std::right << std::fixed << std::setprecision(1)
             << std::setw(6) << took << " s   ETA " << format_duration(left);
        std::cout << line.str() << '\n' << std::flush;
    }
    void interrupted_again(std::size_t k, const case_key& key) {
        std::cout << (m_jobs == 1 ? "" : again_head(k, key)) << " INTERRUPTED\n" << std::flush;
    }
    void interrupted(std::size_t index, const case_key& key) {
        std::cout << (m_jobs == 1 ? "" : head(index, key)) << " INTERRUPTED\n" << std::flush;
    }
    void not_recorded(std::size_t index, const case_key& key) {
        std::cout << (m_jobs == 1 ? "" : head(index, key)) << " NOT RECORDED\n" << std::flush;
    }
    /// The run's deadline (the gate's budget) passed with `left` cases not started.
    void deadline_reached(std::size_t left) {
        std::cout << "deadline reached: " << left << (left == 1 ? " case" : " cases")
                  << " not started\n"
                  << std::flush;
    }
    /// The builds still to come (--build), in seconds: part of every ETA until they are done.
    void builds_left(double seconds) { m_builds_left = seconds; }
    /// `took`: the case's time in this session, a second measurement's included (the ETA's).
    void end(std::size_t index, const case_record& record, double took) {
        m_spent += took;
        ++m_ran;
        --m_left;
        std::ostringstream line;
        line << (m_jobs == 1 ? "" : head(index, record.key)) << std::left << std::setw(16)
             << to_string(record.verdict) << std::right << std::fixed << std::setprecision(1)
             << std::setw(6) << took << " s   ETA "
             << format_duration(m_spent / static_cast<double>(m_ran) * static_cast<double>(m_left) /
                                    static_cast<double>(m_jobs) +
                                m_builds_left);
        std::cout << line.str() << '\n' << std::flush;
    }

private:
    std::string again_head(std::size_t k, const case_key& key) const {
        std::ostringstream out;
        const std::string total = std::to_string(m_again_estimate.size());
        out << "[again " << std::setw(static_cast<int>(total.size())) << k + 1 << '/' << total
            << "] " << std::left << std::setw(static_cast<int>(m_width)) << key.str() << std::right;
        return out.str();
    }
    std::string head(std::size_t index, const case_key& key) const {
        std::ostringstream out;
        out << '[' << std::setw(static_cast<int>(std::to_string(m_total).size())) << index + 1
            << '/' << m_total << "] " << std::left << std::setw(static_cast<int>(m_width))
            << key.str() << std::right;
        return out.str();
    }
    std::size_t m_total = 0;
    int m_jobs = 1;
    std::size_t m_width = 4;
    std::size_t m_left = 0;
    std::size_t m_ran = 0;
    double m_spent = 0;
    double m_builds_left = 0;
    std::vector<double> m_again_estimate; ///< each deferred case's expected second process
};

} // namespace pitfall::runner::run_parts
