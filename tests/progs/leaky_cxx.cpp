// C++ leaks for `heaptrail leaks` (tests/e2e/cases_stacks.py finds the
// lines by their LEAK: markers): 4 Widgets leaked through new in a member
// function, a std::string's buffer leaked with its string, a vector's
// storage.  Names must come out demangled.
#include <cstdint>
#include <string>
#include <vector>

#include "tp.h"

namespace shop {
struct Widget {
	long id;
	char name[40];
};

struct Factory {
	__attribute__((noinline)) Widget *make(long id)
	{
		return new Widget{id, {}}; // LEAK:cxx_new
	}
};
} // namespace shop

int main()
{
	shop::Factory f;
	for (long i = 0; i < 4; i++)
		tp_keep(f.make(i));
	tp_keep(new std::vector<int>(100)); // LEAK:cxx_vector
	return 0;
}
