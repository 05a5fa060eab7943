package ssfkit.gc_bound_test

import data.ssfkit.gc_bound
import data.ssfkit.plans

function(timeout, gc) := plans.plan([plans.create("aws_lambda_function.ssf", "aws_lambda_function", {
	"timeout": timeout,
	"environment": [{"variables": {"SSFKIT_GC_BOUND_SECONDS": gc}}],
})])

test_bound_above_timeout_passes if count(gc_bound.deny) == 0 with input as function(60, "300")

test_bound_at_timeout_denied if count(gc_bound.deny) == 1 with input as function(300, "300")
