package ssfkit.gc_bound_test

import data.ssfkit.gc_bound
import data.ssfkit.plans

function(timeout, gc) := plans.plan([plans.create("aws_lambda_function.ssf", "aws_lambda_function", {
	"timeout": timeout,
	"environment": [{"variables": {"SSFKIT_GC_BOUND_SECONDS": gc}}],
})])

test_bound_above_timeout_passes if count(gc_bound.deny) == 0 with input as function(60, "300")

test_bound_at_timeout_denied if count(gc_bound.deny) == 1 with input as function(300, "300")

cloud_run(timeout, gc) := plans.plan([plans.create("google_cloud_run_v2_service.this", "google_cloud_run_v2_service", {"template": [{
	"timeout": timeout,
	"containers": [{"env": [{"name": "SSFKIT_SSF", "value": "teller"}, {"name": "SSFKIT_GC_BOUND_SECONDS", "value": gc}]}],
}]})])

test_cloud_run_bound_above_timeout_passes if count(gc_bound.deny) == 0 with input as cloud_run("60s", "300")

test_cloud_run_bound_at_timeout_denied if count(gc_bound.deny) == 1 with input as cloud_run("300s", "300")

function_app(timeout, gc) := plans.plan([plans.create("azurerm_function_app_flex_consumption.this", "azurerm_function_app_flex_consumption", {"app_settings": {
	"AzureFunctionsJobHost__functionTimeout": timeout,
	"SSFKIT_GC_BOUND_SECONDS": gc,
}})])

test_function_app_bound_above_timeout_passes if count(gc_bound.deny) == 0 with input as function_app("00:01:00", "300")

test_function_app_bound_below_timeout_denied if count(gc_bound.deny) == 1 with input as function_app("00:10:00", "300")

site_template(timeout, gc) := plans.plan([plans.create("azurerm_resource_group_template_deployment.app", "azurerm_resource_group_template_deployment", {"template_content": json.marshal({"resources": [
	{"type": "Microsoft.Web/sites", "properties": {"siteConfig": {"appSettings": [
		{"name": "AzureFunctionsJobHost__functionTimeout", "value": timeout},
		{"name": "SSFKIT_GC_BOUND_SECONDS", "value": gc},
	]}}},
	{"type": "Microsoft.Web/sites/basicPublishingCredentialsPolicies", "properties": {"allow": false}},
]})})])

test_site_template_bound_above_timeout_passes if count(gc_bound.deny) == 0 with input as site_template("00:01:00", "300")

test_site_template_bound_below_timeout_denied if count(gc_bound.deny) == 1 with input as site_template("00:05:00", "300")

# Fail closed: T unset, empty or not a number, a timeout left at a default above T or written
# in a form the rule once misread, and an unset Azure timeout are all denied.
test_unreadable_bounds_denied if {
	every p in [
		function(60, ""),
		function(60, "abc"),
		function(60, null),
		plans.plan([plans.create("aws_lambda_function.ssf", "aws_lambda_function", {"timeout": 60, "environment": [{"variables": {"SSFKIT_SSF": "teller"}}]})]),
		cloud_run(null, "200"),
		cloud_run("1m", "300"),
		function_app("1.00:00:00", "3600"),
		function_app(null, "300"),
		site_template("1.00:00:00", "3600"),
	] {
		count(gc_bound.deny) >= 1 with input as p
	}
}

test_defaults_below_the_bound_pass if {
	count(gc_bound.deny) == 0 with input as function(null, "300") # Lambda's default timeout is 3 s
	count(gc_bound.deny) == 0 with input as cloud_run(null, "900") # Cloud Run's is 300 s
	count(gc_bound.deny) == 0 with input as function_app("0.00:05:00", "900")
}

test_functions_without_ssfkit_settings_ignored if {
	count(gc_bound.deny) == 0 with input as plans.plan([plans.create("aws_lambda_function.other", "aws_lambda_function", {"timeout": 900, "environment": [{"variables": {"X": "1"}}]})])
}

coordination_function(vars) := plans.plan([plans.create("aws_lambda_function.writer", "aws_lambda_function", {"timeout": 60, "environment": [{"variables": vars}]})])

test_coordination_function_has_no_bound if count(gc_bound.deny) == 0 with input as coordination_function({"SSFKIT_COORD_ROLE": "writer", "SSFKIT_COORD_STORE": "dynamodb://t"})

test_ssf_calling_itself_coordination_still_needs_its_bound if count(gc_bound.deny) == 1 with input as coordination_function({"SSFKIT_COORD_ROLE": "writer", "SSFKIT_SSF": "teller"})
