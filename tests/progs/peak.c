/* Known peaks, leaks and sizes.
 *   mark "a"; 10 x malloc(1000), all freed       (peak blocks 10)
 *   mark "b"; 3 x malloc(5000), 2 freed          (peak bytes 15000)
 *   mark "c"; malloc(100) leaked; then malloc/free pairs of 8 (x1),
 *   100 (x2) and 3000 (x3); mark "d".
 * malloc 20, free 18, bytes_allocated 34308, live at exit 2 blocks /
 * 5100 bytes. */
#include <stdlib.h>

#include <heaptrail.h>

#include "tp.h"

int main(void)
{
	void *p[10];
	HEAPTRAIL_MARK("a");
	for (int i = 0; i < 10; i++)
		TP_CHECK((p[i] = tp_keep(malloc(1000))) != NULL);
	for (int i = 0; i < 10; i++)
		free(p[i]);
	HEAPTRAIL_MARK("b");
	for (int i = 0; i < 3; i++)
		TP_CHECK((p[i] = tp_keep(malloc(5000))) != NULL);
	free(p[0]);
	free(p[1]);
	HEAPTRAIL_MARK("c");
	TP_CHECK(tp_keep(malloc(100)) != NULL);
	static const struct {
		size_t size;
		int n;
	} pairs[] = {{8, 1}, {100, 2}, {3000, 3}};
	for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++)
		for (int i = 0; i < pairs[k].n; i++)
			free(tp_keep(malloc(pairs[k].size)));
	HEAPTRAIL_MARK("d");
	return 0;
}
