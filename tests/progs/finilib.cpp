/* A shared library that frees at exit what it allocated at load
 * (cases_api.py, exit_frees_in_libraries): a C++ object with static
 * storage (a vector of 3333 bytes, freed by its destructor) and a block
 * of 1111 bytes freed by an ELF destructor. */
#include <cstdlib>
#include <vector>

namespace {
struct Holder {
	std::vector<char> v;
	Holder() : v(3333) {}
};
Holder holder;
void *block;
} // namespace

__attribute__((constructor)) static void finilib_load(void)
{
	block = std::malloc(1111);
}

__attribute__((destructor)) static void finilib_unload(void)
{
	std::free(block);
}

extern "C" __attribute__((visibility("default"))) int finilib_size(void)
{
	return (int)holder.v.size();
}
