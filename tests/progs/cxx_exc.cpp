// C++ with exceptions and iostreams (tests/real): exceptions thrown
// through several frames (std::runtime_error with a message, a class of
// our own, a rethrow, a nested exception, one from a destructor's scope),
// caught by type; stringstreams, formatted output on cout and cerr, a
// map and vectors of strings.  Usage: cxx_exc [terminate].  Prints a
// deterministic report on stdout, a summary on cerr, exits 3; with
// "terminate", ends with an uncaught exception (std::terminate, SIGABRT).
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct parse_error : std::runtime_error {
	int line;
	parse_error(const std::string &what, int l) : std::runtime_error(what), line(l) {}
};

int parse(const std::string &s, int line)
{
	std::istringstream in(s);
	int v;
	if (!(in >> v))
		throw parse_error("not a number: '" + s + "'", line);
	if (v < 0)
		throw std::out_of_range("negative: " + std::to_string(v));
	return v;
}

struct guard {
	std::vector<std::string> &log;
	std::string name;
	guard(std::vector<std::string> &l, std::string n) : log(l), name(std::move(n)) {}
	~guard() { log.push_back("unwound " + name); }
};

int deep(int depth, std::vector<std::string> &log)
{
	guard g(log, "frame " + std::to_string(depth));
	auto keep = std::make_unique<std::vector<int>>(static_cast<size_t>(depth) * 10, depth);
	if (depth == 0)
		throw std::runtime_error("bottom reached with " + std::to_string(keep->size()));
	return deep(depth - 1, log) + 1;
}

} // namespace

int main(int argc, char **argv)
{
	std::map<std::string, int> counts;
	std::vector<std::string> log;
	std::ostringstream report;
	const char *inputs[] = {"12", "x7", "-3", "40", "", "1000000", "oops"};
	int sum = 0;
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 7; i++) {
			try {
				sum += parse(inputs[i], i + 1);
				counts["ok"]++;
			} catch (const parse_error &e) {
				counts["parse_error"]++;
				if (round == 0)
					report << "line " << e.line << ": " << e.what() << '\n';
			} catch (const std::exception &e) {
				counts[std::string("other: ") + e.what()]++;
			}
		}
		try {
			try {
				deep(8, log);
			} catch (const std::runtime_error &) {
				counts["rethrown"]++;
				throw;
			}
		} catch (const std::exception &e) {
			try {
				std::throw_with_nested(std::logic_error("wrapped"));
			} catch (const std::logic_error &outer) {
				try {
					std::rethrow_if_nested(outer);
				} catch (const std::runtime_error &inner) {
					if (round == 0)
						report << "nested: " << outer.what() << " <- " << inner.what()
						       << '\n';
					counts["nested"]++;
				}
			}
		}
	}
	if (argc > 1 && std::string(argv[1]) == "terminate") {
		std::cout << report.str() << std::flush;
		throw std::runtime_error("nobody catches this");
	}
	std::cout << report.str();
	for (const auto &kv : counts)
		std::cout << std::left << std::setw(24) << kv.first << std::right << std::setw(8)
			  << kv.second << '\n';
	std::cout << "sum " << sum << ", unwound frames " << log.size() << ", first "
		  << log.front() << ", last " << log.back() << '\n';
	std::cout << std::fixed << std::setprecision(3) << "mean " << sum / 1400.0 << std::endl;
	std::cerr << "cxx_exc: " << counts.size() << " kinds of outcome" << std::endl;
	return 3;
}
