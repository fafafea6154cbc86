/* A shared object that is not a lagless module (no lagless_module symbol). */
int lagless_not_a_module(void);

int
lagless_not_a_module(void)
{
	return 0;
}
