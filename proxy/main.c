#include <stdio.h>
int main(void)
{
	fputs("mongoguard: not built yet\n", stderr);
	return 1;
}
