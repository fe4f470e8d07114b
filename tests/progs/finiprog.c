/* finiprog DIR: links libfinilib.so (its objects freed at exit by their
 * destructors) and dlopens DIR/libfinidl.so, never closed, which frees in
 * its destructor too; main allocates nothing (cases_api.py,
 * exit_frees_in_libraries).  Nothing the libraries allocated is live at
 * exit. */
#include <dlfcn.h>
#include <stdio.h>

int finilib_size(void);

int main(int argc, char **argv)
{
	char path[4096];
	if (argc != 2 || snprintf(path, sizeof(path), "%s/libfinidl.so", argv[1]) >= (int)sizeof(path))
		return 2;
	if (!dlopen(path, RTLD_NOW)) {
		fprintf(stderr, "finiprog: %s\n", dlerror());
		return 1;
	}
	return finilib_size() == 3333 ? 0 : 1;
}
