// An operator new that throws std::bad_alloc, then a new and a delete that
// must still be recorded: the recorder's frames the exception unwinds
// through leave the thread recording (src/preload/cxxops.c).  Between the
// marks "main" and "end": the failed new (on another allocator, not
// recorded: it throws), then new char[77] and its delete[].
#include <cstdint>
#include <new>

#include <heaptrail.h>

#include "tp.h"

int main()
{
	HEAPTRAIL_MARK("main");
	int caught = 0;
	try {
		volatile std::size_t huge = SIZE_MAX / 2;
		char *p = new char[huge];
		tp_keep(p);
	} catch (const std::bad_alloc &) {
		caught = 1;
	}
	TP_CHECK(caught);
	char *c = new char[77];
	tp_keep(c);
	delete[] c;
	HEAPTRAIL_MARK("end");
	return 0;
}
