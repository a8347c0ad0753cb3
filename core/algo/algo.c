/* algo: the parameters' defaults (algo.h); the algorithms' names are in
 * names.c's table, their dispatch in algo_run.c. */
#include "algo/algo.h"

#include <string.h>

void rc_algo_params_default(rc_algo_params *p, rc_algo_name name)
{
	memset(p, 0, sizeof *p);
	p->name = name;
	p->iterations = name == RC_ALGO_FDK ? 1 : 10;
	p->relaxation = 1.0;
	p->subsets = 1;
	p->window = RC_WINDOW_RAM_LAK;
	p->cutoff = 1.0;
	p->scan = RC_SCAN_AUTO;
}
