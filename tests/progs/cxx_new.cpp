// new/delete reach malloc/free.  Between the marks "main" and "end" the
// trace holds exactly: 10 x operator new(24) + delete, new char[1000] +
// delete[], vector<int>::reserve(1000) (operator new(4000)) + its delete,
// and one nothrow operator new that fails (libstdc++ throws and catches a
// std::bad_alloc inside it: one more malloc(136) + free): malloc 14
// (1 failed), free 13.  Before main, libstdc++ allocates its emergency
// exception pool (one malloc of 72704 bytes with GCC 12).
#include <cstdint>
#include <new>
#include <vector>

#include <heaptrail.h>

#include "tp.h"

struct Foo {
	long a, b, c;
};

int main(int argc, char **)
{
	HEAPTRAIL_MARK("main");
	Foo *f[10];
	for (int i = 0; i < 10; i++) {
		f[i] = new Foo{i, i, i};
		tp_keep(f[i]);
	}
	for (int i = 0; i < 10; i++)
		delete f[i];
	char *c = new char[1000];
	tp_keep(c);
	c[999] = 1;
	delete[] c;
	{
		std::vector<int> v;
		v.reserve(1000);
		v.push_back(argc);
		tp_keep(v.data());
	}
	volatile std::size_t huge = SIZE_MAX / 2;
	void *x = ::operator new(huge, std::nothrow);
	TP_CHECK(x == nullptr);
	HEAPTRAIL_MARK("end");
	return 0;
}
