// Hostile scenario programs: each variant fights the harness in one way (see scenario.json).
// Plain C++ speaking the scenario protocol directly (--backend B --variant V --out PATH; exit 0
// with a result, 77 for unsupported), not the SDK: the point is what the SDK would never do.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <string>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {
std::string g_variant;
std::string g_out;
std::string g_since; ///< a fork chain's start (seconds since the epoch), handed down its links

std::string
good_result(const std::string& samples = R"({"step_seconds": {"unit": "s", "values": [0.001]}})",
            const std::string& outcome = R"({"status": "ok"})", const std::string& info = "{}") {
    return R"({"schema": "pitfall.result/1", "scenario": "hostile", "variant": ")" + g_variant +
           R"(", "backend": "cpu", "params": {"samples": 1, "warmup": 0}, "outcome": )" + outcome +
           R"(, "ran_on": "cpu: hostile", "measurements": {}, "samples": )" + samples +
           R"(, "events": {}, "info": )" + info +
           R"(, "checks": [], "memory": {"tracked_peak_bytes": 0, "tracked_current_bytes": 0,)"
           R"( "limit_bytes": null, "allocations": 0, "failed_allocations": 0}})" +
           "\n";
}

void write_result(const std::string& text) {
    FILE* f = std::fopen(g_out.c_str(), "wb");
    if (f == nullptr)
        std::exit(3);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
}

// Text that breaks its container, as JSON string contents: terminal escapes (clear, retitle,
// carriage return over a forged PASS, backspaces, a C1 CSI, a bidi override), characters XML 1.0
// forbids (a C0 control, U+FFFE, U+FFFF), and markup for HTML and Markdown. The same list is
// test_hostile_io.py's HOSTILE_STRINGS.
const char* const hostile_json_strings[] = {
    R"(\u001b[2J\u001b[Hcleared)",
    R"(\u001b]0;retitled\u0007)",
    R"(\r[1/1] cpu.hostile.ok  PASS)",
    R"(\b\b\b\bPASS)",
    R"(\u009b31mred)",
    R"(\u202egnp.exe)",
    R"(\u0001\u000b\u001f)",
    R"(\ufffe\uffff)",
    R"(</system-out></testcase><script>alert(1)</script>)",
    R"(| cell | `code` **bold** [link](x))",
};

/// A case that fails a check whose name, detail, ran_on and stderr carry every hostile string.
int hostile_text() {
    std::string all;
    for (const char* s : hostile_json_strings)
        all += s;
    // One failing check carrying them all: its name and detail make the case's reason.
    const std::string checks =
        R"([{"name": "check_)" + all + R"(", "passed": false, "detail": ")" + all + R"("}])";
    std::string result = good_result();
    const std::string no_checks = R"("checks": [])";
    result.replace(result.find(no_checks), no_checks.size(), R"("checks": )" + checks);
    const std::string plain_ran_on = R"("ran_on": "cpu: hostile")";
    result.replace(result.find(plain_ran_on), plain_ran_on.size(),
                   R"("ran_on": "cpu: )" + all + R"(")");
    write_result(result);
    // And the raw bytes on stderr, which the record keeps as the output's tail.
    std::fprintf(stderr, "\x1b[2J\x1b]0;retitled\x07\r[1/1] cpu.hostile.ok  PASS\xc2\x9b"
                         "31m"
                         "\xef\xbf\xbe\x01\n");
    return 0;
}

/// Appends to its run's results.jsonl (two folders above its result path) a PASS for the case
/// before it, which crashed, naming the last line's digest as pitfall would if it can (it
/// cannot compute one without a library: it copies the last line's own "prev" instead), then
/// writes a good result of its own.
int forge_record() {
    const std::string run = g_out.substr(0, g_out.rfind("/cases/"));
    FILE* f = std::fopen((run + "/results.jsonl").c_str(), "ab");
    if (f != nullptr) {
        std::fputs(
            R"({"record": "case", "case": "cpu.hostile.result_then_segv", "verdict": "PASS",)"
            R"( "reason": "forged", "prev": ""})"
            "\n",
            f);
        std::fclose(f);
    }
    write_result(good_result());
    return 0;
}

/// The run's results.jsonl as bytes ("" where it cannot be read).
std::string read_records(const std::string& path) {
    std::string text;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        char buffer[65536];
        for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
            text.append(buffer, n);
        std::fclose(f);
    }
    return text;
}

const char* const forged_pass =
    R"({"record":"case","case":"cpu.hostile.result_then_segv","verdict":"PASS","reason":"forged"})"
    "\n";

/// The attacks on the run's own records that a chain alone does not stop, then a good result:
///   unchain_records   line 1 rewritten without "prev" (a file whose first line has none reads
///                     as unchained), then a forged PASS appended, in the same file;
///   replace_records   a copy holding the forged PASS renamed over results.jsonl, so that
///                     pitfall would append to the old file, which nobody reads;
///   flip_in_place     the first CRASH verdict made PASS in place, the file's length unchanged.
int attack_records(const std::string& how) {
    const std::string path = g_out.substr(0, g_out.rfind("/cases/")) + "/results.jsonl";
    std::string text = read_records(path);
    if (how == "unchain_records") {
        const std::size_t at = text.find(R"("prev":"",)");
        if (at != std::string::npos && at < text.find('\n'))
            text.erase(at, std::strlen(R"("prev":"",)"));
        text += forged_pass;
        if (FILE* f = std::fopen(path.c_str(), "wb")) { // the same inode, truncated
            std::fwrite(text.data(), 1, text.size(), f);
            std::fclose(f);
        }
    } else if (how == "replace_records") {
        text += forged_pass;
        const std::string copy = path + ".forged";
        if (FILE* f = std::fopen(copy.c_str(), "wb")) {
            std::fwrite(text.data(), 1, text.size(), f);
            std::fclose(f);
            std::rename(copy.c_str(), path.c_str());
        }
    } else if (how == "flip_in_place") {
        const std::size_t at = text.find(R"("verdict":"CRASH")");
        if (at != std::string::npos)
            if (FILE* f = std::fopen(path.c_str(), "r+b")) {
                std::fseek(f, static_cast<long>(at + std::strlen(R"("verdict":)")), SEEK_SET);
                std::fputs(R"("PASS" )", f); // as long as "CRASH", a blank before the comma
                std::fclose(f);
            }
    }
    write_result(good_result());
    return 0;
}

/// A case that needs a helper of its own: double-forked (an orphan the harness adopts), it
/// marks a file after 0.8 s, keeping the run's token (`with_token`) or exec'd with an empty
/// environment; the case waits up to 2.5 s for the mark, then writes a good result, or exits 3
/// without one where the helper was ended (by another case's clean-up, say).
int needs_helper(bool with_token) {
    const std::string mark = g_out + ".helper";
    if (::fork() == 0) {
        if (::fork() == 0) {
            if (with_token) {
                ::usleep(800 * 1000);
                if (FILE* f = std::fopen(mark.c_str(), "w"))
                    std::fclose(f);
                ::_exit(0);
            }
            char* const argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"),
                                  const_cast<char*>("sleep 0.8; : > \"$0\""),
                                  const_cast<char*>(mark.c_str()), nullptr};
            char* const no_environment[] = {nullptr};
            ::execve("/bin/sh", argv, no_environment);
            ::_exit(126);
        }
        ::_exit(0);
    }
    ::wait(nullptr);
    for (int waited = 0; waited < 250; ++waited) {
        if (::access(mark.c_str(), F_OK) == 0) {
            write_result(good_result());
            return 0;
        }
        ::usleep(10 * 1000);
    }
    std::fprintf(stderr, "hostile: the helper never marked %s: it was ended\n", mark.c_str());
    return 3;
}

/// Becomes `sleep` with an empty environment (no token), its command line naming the result
/// path so that a test can find it.
[[noreturn]] void sleep_without_token() {
    const std::string name = "escapee " + g_out;
    char* const argv[] = {const_cast<char*>(name.c_str()), const_cast<char*>("100000"), nullptr};
    char* const no_environment[] = {nullptr};
    ::execve("/bin/sleep", argv, no_environment);
    ::_exit(126);
}

/// A grandchild that drops the run's token: double-forked (an orphan), exec'd with an empty
/// environment. Its command line names the result path, so a test can find it; it stays in
/// the case's process group. Then a good result (or, `hang`, the case sleeps on).
int env_cleared_grandchild(bool hang = false) {
    const pid_t child = ::fork();
    if (child == 0) {
        if (::fork() == 0) {
            sleep_without_token();
        }
        ::_exit(0);
    }
    ::waitpid(child, nullptr, 0);
    if (hang)
        for (;;)
            ::pause();
    write_result(good_result());
    return 0;
}

/// A grandchild that leaves the case's process group (setsid) and its cgroup (where it has one,
/// for the cgroup above the run's), its environment cleared, then sleeps; the case writes a
/// good result once it has moved. Without a cgroup (cgroup v1, subreaper mode) the move is
/// skipped and it is an env-cleared grandchild.
int cgroup_move() {
    int ready[2];
    if (::pipe(ready) != 0)
        return 5;
    const pid_t child = ::fork();
    if (child == 0) {
        if (::fork() == 0) {
            ::close(ready[0]);
            ::setsid(); // out of the case's process group too: a group kill misses it
            FILE* f = std::fopen("/proc/self/cgroup", "r");
            char line[4096] = {};
            std::string path;
            while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr)
                if (std::strncmp(line, "0::", 3) == 0)
                    path = std::string(line + 3, std::strcspn(line + 3, "\n"));
            if (f != nullptr)
                std::fclose(f);
            // <own>/pitfall-<pid>-<token>/case-N: two levels up is pitfall's own cgroup.
            for (int up = 0; up < 2 && path.rfind('/') != std::string::npos; ++up)
                path.erase(path.rfind('/'));
            // Where cgroup v2 is mounted: alone, or beside v1 (a hybrid system's "unified").
            bool moved = false;
            for (const char* mount : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
                FILE* procs = std::fopen((mount + path + "/cgroup.procs").c_str(), "w");
                if (procs == nullptr)
                    continue;
                moved = std::fprintf(procs, "0\n") > 0;
                moved = std::fclose(procs) == 0 && moved;
                if (moved)
                    break;
            }
            // Where it went, beside the case's result: the test says whether the move happened.
            if (FILE* note = std::fopen((g_out + ".moved").c_str(), "w")) {
                std::fprintf(note, "%s %s\n", moved ? "moved to" : "not moved to", path.c_str());
                std::fclose(note);
            }
            (void)!::write(ready[1], "m", 1); // the case ends only once this one has moved
            ::close(ready[1]);
            sleep_without_token();
        }
        ::_exit(0);
    }
    ::close(ready[1]);
    ::waitpid(child, nullptr, 0);
    char byte = 0;
    (void)!::read(ready[0], &byte, 1);
    write_result(good_result());
    return 0;
}

/// One link of a fork-and-exit chain: forks the next link, which re-execs this program with
/// an empty environment (no token), and exits; each link lives about a millisecond, so a
/// sweep that looks once finds an exited parent and misses the child.
[[noreturn]] void chain_link() {
    // Bounded, should everything else fail: a chain nobody ends stops after 60 s of links.
    const long started =
        g_since.empty() ? static_cast<long>(::time(nullptr)) : std::atol(g_since.c_str());
    const std::string since = std::to_string(started);
    for (;;) {
        ::usleep(1000);
        if (::time(nullptr) - started > 60)
            ::_exit(0);
        const pid_t next = ::fork();
        if (next < 0)
            std::fprintf(stderr, "chain: fork: %s\n", std::strerror(errno));
        if (next != 0)
            ::_exit(0);
        const char* self = "/proc/self/exe";
        char* const argv[] = {const_cast<char*>("hostile-chain"), const_cast<char*>("--variant"),
                              const_cast<char*>("chain_link"),    const_cast<char*>("--out"),
                              const_cast<char*>(g_out.c_str()),   const_cast<char*>("--since"),
                              const_cast<char*>(since.c_str()),   nullptr};
        char* const no_environment[] = {nullptr};
        ::execve(self, argv, no_environment);
        std::fprintf(stderr, "chain: execve: %s\n", std::strerror(errno));
    }
}

[[noreturn]] void sleep_for_ever() {
    for (;;)
        ::pause();
}

int setsid_grandchild() {
    const pid_t child = ::fork();
    if (child == 0) {
        ::setsid(); // out of the case's process group: a group kill misses it
        const pid_t grandchild = ::fork();
        if (grandchild == 0) {
            ::execl("/bin/sleep", "sleep", "100000", static_cast<char*>(nullptr));
            sleep_for_ever();
        }
        std::printf("grandchild %d\n", static_cast<int>(grandchild));
        std::fflush(stdout);
        ::_exit(0); // the grandchild is an orphan now
    }
    ::usleep(100 * 1000);
    write_result(good_result());
    return 0;
}

int big_output() {
    std::vector<char> block(1 << 20, 'x');
    block.back() = '\n';
    for (int i = 0; i < 1024; ++i)
        if (std::fwrite(block.data(), 1, block.size(), stdout) != block.size())
            return 4;
    std::fflush(stdout);
    write_result(good_result());
    return 0;
}

int unbounded_memory() {
    std::vector<char*> held;
    for (;;) { // uncaught std::bad_alloc at the address-space limit: SIGABRT
        char* block = new char[64 << 20];
        std::memset(block, 1, 64 << 20);
        held.push_back(block);
    }
}

int run(const std::string& v) {
    if (v == "hang")
        sleep_for_ever();
    if (v == "ignore_term") {
        std::signal(SIGTERM, SIG_IGN);
        sleep_for_ever();
    }
    if (v == "stop_self") {
        ::raise(SIGSTOP);
        sleep_for_ever();
    }
    if (v == "ptrace_stop") { // its parent (pitfall) made its tracer, then a stop only it ends
        ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
        ::raise(SIGSTOP);
        sleep_for_ever();
    }
    if (v == "setsid_grandchild")
        return setsid_grandchild();
    if (v == "big_output")
        return big_output();
    if (v == "truncated_result") {
        const std::string text = good_result();
        write_result(text.substr(0, text.size() / 2));
        return 0;
    }
    if (v == "deep_result") {
        const int depth = 100000;
        write_result(good_result(std::string(depth, '[') + std::string(depth, ']')));
        return 0;
    }
    if (v == "non_utf8_result") {
        write_result(good_result(R"({})", R"({"status": "ok"})", "{\"note\": \"\xff\xfe\xc3\"}"));
        return 0;
    }
    if (v == "wrong_types") {
        write_result(good_result(R"("x")", "5"));
        return 0;
    }
    if (v == "wrong_samples") {
        write_result(good_result(R"("x")"));
        return 0;
    }
    if (v == "result_fifo")
        return ::mkfifo(g_out.c_str(), 0644) == 0 ? 0 : 5;
    if (v == "result_dir")
        return ::mkdir(g_out.c_str(), 0755) == 0 ? 0 : 5;
    if (v == "exit77_no_result")
        return 77;
    if (v == "result_then_segv") {
        write_result(good_result());
        ::raise(SIGSEGV);
        return 6;
    }
    if (v == "unbounded_memory")
        return unbounded_memory();
    if (v == "ok") {
        write_result(good_result());
        return 0;
    }
    if (v == "hostile_text")
        return hostile_text();
    if (v == "forge_record")
        return forge_record();
    if (v == "unchain_records" || v == "replace_records" || v == "flip_in_place")
        return attack_records(v);
    if (v == "helper_with_token" || v == "helper_env_cleared")
        return needs_helper(v == "helper_with_token");
    if (v == "env_cleared_grandchild")
        return env_cleared_grandchild();
    if (v == "fork_chain") {
        write_result(good_result());
        chain_link(); // never returns
    }
    if (v == "chain_link")
        chain_link();
    if (v == "slow_ok") {
        ::usleep(1500 * 1000);
        write_result(good_result());
        return 0;
    }
    if (v == "env_cleared_then_hang")
        return env_cleared_grandchild(true);
    if (v == "cgroup_move")
        return cgroup_move();
    if (v == "chain_then_hang") {
        if (::fork() == 0)
            chain_link();
        for (;;)
            ::pause();
    }
    std::fprintf(stderr, "hostile: unknown variant '%s'\n", v.c_str());
    return 2;
}
} // namespace

int main(int argc, char** argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--variant")
            g_variant = argv[i + 1];
        else if (flag == "--out")
            g_out = argv[i + 1];
        else if (flag == "--since")
            g_since = argv[i + 1];
    }
    if (g_variant.empty() || g_out.empty()) {
        std::fprintf(stderr, "usage: %s --backend cpu --variant V --out result.json\n", argv[0]);
        return 2;
    }
    return run(g_variant);
}
