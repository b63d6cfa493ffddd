/*
 * Worker placement (grist_place_workers()): a pure function of the affinity mask and the
 * NUMA nodes' CPUs, so machines of several nodes are tested here on any machine, with
 * made-up topologies.
 */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "exec/placement.h"

static cpu_set_t range(int lo, int hi)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	for (int c = lo; c <= hi; c++)
		CPU_SET(c, &s);
	return s;
}

static int only_cpu(const cpu_set_t *s)
{
	assert_int_equal(CPU_COUNT(s), 1);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, s))
			return c;
	return -1;
}

/* One node (or none known): one allowed CPU each, in turn, never one outside the mask. */
static void test_one_node(void **state)
{
	static const int want[3] = { 2, 5, 9 };
	cpu_set_t allowed, out[6], nodes[1];

	(void)state;
	CPU_ZERO(&allowed);
	CPU_SET(2, &allowed);
	CPU_SET(5, &allowed);
	CPU_SET(9, &allowed);
	assert_true(grist_place_workers(&allowed, NULL, 0, 6, out));
	for (int i = 0; i < 6; i++)
		assert_int_equal(only_cpu(&out[i]), want[i % 3]);
	/* the allowed CPUs all on one of two nodes (taskset inside node 0): the same */
	nodes[0] = range(0, 15);
	assert_true(grist_place_workers(&allowed, nodes, 1, 6, out));
	assert_int_equal(only_cpu(&out[4]), 5);
}

/* Workers dealt to nodes in proportion to their allowed CPUs, each on its node's allowed CPUs. */
static void test_nodes_in_proportion(void **state)
{
	cpu_set_t nodes[2] = { range(0, 7), range(8, 15) }, allowed = range(0, 5), out[8], want0, want1;
	int on1 = 0;

	(void)state;
	CPU_SET(8, &allowed);
	CPU_SET(9, &allowed);
	want0 = range(0, 5);
	want1 = range(8, 9);
	assert_true(grist_place_workers(&allowed, nodes, 2, 8, out));
	for (int i = 0; i < 8; i++) {
		if (CPU_EQUAL(&out[i], &want1))
			on1++;
		else
			assert_true(CPU_EQUAL(&out[i], &want0));
	}
	assert_int_equal(on1, 2); /* 6 and 2, not 4 and 4 */

	/* two workers on two equal nodes: one each, not both on node 0 */
	allowed = range(0, 15);
	assert_true(grist_place_workers(&allowed, nodes, 2, 2, out));
	assert_true(CPU_EQUAL(&out[0], &nodes[0]));
	assert_true(CPU_EQUAL(&out[1], &nodes[1]));
}

/* Allowed CPUs only on node 2 of three (node 1 holds none): per CPU, inside the mask. */
static void test_nodes_without_allowed(void **state)
{
	cpu_set_t nodes[3] = { range(0, 3), range(4, 7), range(8, 11) }, allowed = range(9, 10), out[3];

	(void)state;
	assert_true(grist_place_workers(&allowed, nodes, 3, 3, out));
	assert_int_equal(only_cpu(&out[0]), 9);
	assert_int_equal(only_cpu(&out[1]), 10);
	assert_int_equal(only_cpu(&out[2]), 9);
	/* an empty node between two that hold allowed CPUs is skipped */
	CPU_ZERO(&nodes[1]);
	allowed = range(0, 11);
	for (int c = 4; c <= 7; c++)
		CPU_CLR(c, &allowed);
	assert_true(grist_place_workers(&allowed, nodes, 3, 2, out));
	assert_true(CPU_EQUAL(&out[0], &nodes[0]));
	assert_true(CPU_EQUAL(&out[1], &nodes[2]));
	/* an allowed CPU that no node lists (4-7 now): placement falls back to one CPU each */
	allowed = range(0, 11);
	assert_true(grist_place_workers(&allowed, nodes, 3, 1, out));
	assert_int_equal(only_cpu(&out[0]), 0);
}

/* Nothing allowed: false, and the output is left alone. */
static void test_nothing_allowed(void **state)
{
	cpu_set_t allowed, out[1] = { range(3, 3) };

	(void)state;
	CPU_ZERO(&allowed);
	assert_false(grist_place_workers(&allowed, NULL, 0, 1, out));
	assert_int_equal(only_cpu(&out[0]), 3);
}

/*
 * Random topologies: every set is a non-empty part of the mask, within one node when several
 * hold allowed CPUs; with as many workers as allowed CPUs, each node gets exactly its count.
 */
static void test_random_topologies(void **state)
{
	(void)state;
	srand(7);
	for (int round = 0; round < 500; round++) {
		int nnodes = 1 + rand() % 4, per = 1 + rand() % 8, holding = 0, total = 0, got[4] = { 0 };
		cpu_set_t nodes[4], allowed, out[64];
		unsigned nw;

		CPU_ZERO(&allowed);
		for (int n = 0; n < nnodes; n++) {
			nodes[n] = range(n * per, n * per + per - 1);
			for (int c = n * per; c < n * per + per; c++)
				if (rand() % 3)
					CPU_SET(c, &allowed);
		}
		if (!CPU_COUNT(&allowed))
			continue;
		for (int n = 0; n < nnodes; n++) {
			cpu_set_t mine;

			CPU_AND(&mine, &allowed, &nodes[n]);
			holding += CPU_COUNT(&mine) > 0;
		}
		total = CPU_COUNT(&allowed);
		nw = (unsigned)total;
		assert_true(grist_place_workers(&allowed, nodes, nnodes, nw, out));
		for (unsigned i = 0; i < nw; i++) {
			cpu_set_t in;

			CPU_AND(&in, &out[i], &allowed);
			assert_true(CPU_COUNT(&out[i]) > 0);
			assert_true(CPU_EQUAL(&in, &out[i]));
			if (holding < 2) {
				assert_int_equal(CPU_COUNT(&out[i]), 1);
				continue;
			}
			for (int n = 0; n < nnodes; n++) {
				cpu_set_t mine;

				CPU_AND(&mine, &allowed, &nodes[n]);
				if (CPU_EQUAL(&out[i], &mine) && CPU_COUNT(&mine))
					got[n]++;
			}
		}
		if (holding > 1) {
			int sum = 0;

			for (int n = 0; n < nnodes; n++) {
				cpu_set_t mine;

				CPU_AND(&mine, &allowed, &nodes[n]);
				assert_int_equal(got[n], CPU_COUNT(&mine));
				sum += got[n];
			}
			assert_int_equal(sum, total);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_node),
		cmocka_unit_test(test_nodes_in_proportion),
		cmocka_unit_test(test_nodes_without_allowed),
		cmocka_unit_test(test_nothing_allowed),
		cmocka_unit_test(test_random_topologies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
