package ssfkit.delivery_window_test

import data.ssfkit.delivery_window
import data.ssfkit.plans

# The plans below have what the ssf modules plan at their defaults (T = 900 s, a 60 s timeout,
# 5 deliveries), and each test changes one thing. denied(msgs, part): exactly one violation,
# naming part.
denied(msgs, part) if {
	count(msgs) == 1
	some msg in msgs
	contains(msg, part)
}

set(change, attrs) := object.union(change, {"change": object.union(change.change, {"after": object.union(change.change.after, attrs)})})

unset(change, attr) := object.union(change, {"change": object.union(change.change, {"after": object.remove(change.change.after, [attr])})})

# --- AWS -----------------------------------------------------------------------------------------

function := plans.create("aws_lambda_function.ssf", "aws_lambda_function", {
	"function_name": "bank-teller",
	"timeout": 60,
	"environment": [{"variables": {"SSFKIT_SSF": "teller", "SSFKIT_GC_BOUND_SECONDS": "900"}}],
})

invoke_config := plans.create("aws_lambda_function_event_invoke_config.ssf", "aws_lambda_function_event_invoke_config", {
	"function_name": "bank-teller",
	"qualifier": null,
	"maximum_event_age_in_seconds": 600,
	"maximum_retry_attempts": 0,
})

queue := plans.create("aws_sqs_queue.ssf", "aws_sqs_queue", {
	"name": "bank-teller",
	"message_retention_seconds": 600,
	"visibility_timeout_seconds": 120,
	"redrive_policy": json.marshal({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:bank-teller-dlq", "maxReceiveCount": 5}),
})

mapping := plans.create("aws_lambda_event_source_mapping.ssf", "aws_lambda_event_source_mapping", {
	"event_source_arn": "arn:aws:sqs:us-east-1:123456789012:bank-teller",
	"function_name": "arn:aws:lambda:us-east-1:123456789012:function:bank-teller",
	"maximum_batching_window_in_seconds": null,
})

aws(f, c, q, m) := plans.plan([f, c, q, m])

test_aws_default_window_passes if {
	count(delivery_window.deny) == 0 with input as aws(function, invoke_config, queue, mapping)
	count(delivery_window.warn) == 0 with input as aws(function, invoke_config, queue, mapping)
}

test_aws_missing_invoke_config_denied if {
	denied(delivery_window.deny, "no aws_lambda_function_event_invoke_config") with input as plans.plan([function, queue, mapping])
}

test_aws_invoke_config_of_an_alias_does_not_count if {
	denied(delivery_window.deny, "no aws_lambda_function_event_invoke_config") with input as aws(function, set(invoke_config, {"qualifier": "live"}), queue, mapping)
}

test_aws_invoke_config_by_arn_counts if {
	c := set(invoke_config, {"function_name": "arn:aws:lambda:us-east-1:123456789012:function:bank-teller"})
	count(delivery_window.deny) == 0 with input as aws(function, c, queue, mapping)
}

test_aws_event_age_unset_denied if {
	denied(delivery_window.deny, "maximum_event_age_in_seconds is not set") with input as aws(function, set(invoke_config, {"maximum_event_age_in_seconds": null}), queue, mapping)
}

test_aws_event_age_unknown_denied if {
	c := plans.unknown_after_apply(unset(invoke_config, "maximum_event_age_in_seconds"), ["maximum_event_age_in_seconds"])
	denied(delivery_window.deny, "maximum_event_age_in_seconds is known only after apply") with input as aws(function, c, queue, mapping)
}

test_aws_retries_not_a_number_denied if {
	denied(delivery_window.deny, "maximum_retry_attempts is two, not a number") with input as aws(function, set(invoke_config, {"maximum_retry_attempts": "two"}), queue, mapping)
}

test_aws_event_age_at_gc_bound_denied if {
	denied(delivery_window.deny, "900 s after it was sent (maximum event age 900 s") with input as aws(function, set(invoke_config, {"maximum_event_age_in_seconds": 900}), queue, mapping)
}

# 600 s + 60 s + 1 minute (one retry) passes; + 60 s + 2 minutes more (two) reaches T.
test_aws_retries_widen_the_window if {
	count(delivery_window.deny) == 0 with input as aws(function, set(invoke_config, {"maximum_retry_attempts": 1}), queue, mapping)
	denied(delivery_window.deny, "900 s after it was sent (maximum event age 600 s, 2 retries") with input as aws(function, set(invoke_config, {"maximum_retry_attempts": 2}), queue, mapping)
}

test_aws_gc_bound_not_a_number_denied if {
	f := set(function, {"environment": [{"variables": {"SSFKIT_GC_BOUND_SECONDS": "15m"}}]})
	denied(delivery_window.deny, "SSFKIT_GC_BOUND_SECONDS (15m) is not a number") with input as aws(f, invoke_config, queue, mapping)
}

test_aws_retention_reaching_gc_bound_denied if {
	denied(delivery_window.deny, "SQS may deliver a start to aws_lambda_function.ssf 900 s after") with input as aws(function, invoke_config, set(queue, {"message_retention_seconds": 780}), mapping)
}

test_aws_default_retention_denied if {
	denied(delivery_window.deny, "retention 345600 s") with input as aws(function, invoke_config, set(queue, {"message_retention_seconds": 345600}), mapping)
}

test_aws_receives_times_visibility_reaching_gc_bound_denied if {
	q := set(queue, {"message_retention_seconds": 60, "redrive_policy": json.marshal({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:bank-teller-dlq", "maxReceiveCount": 8})})
	denied(delivery_window.deny, "maxReceiveCount 8 x visibility timeout 120 s") with input as aws(function, invoke_config, q, mapping)
}

test_aws_batching_window_counts if {
	denied(delivery_window.deny, "batching window 180 s") with input as aws(function, invoke_config, queue, set(mapping, {"maximum_batching_window_in_seconds": 180}))
}

test_aws_batching_window_unknown_denied if {
	m := plans.unknown_after_apply(unset(mapping, "maximum_batching_window_in_seconds"), ["maximum_batching_window_in_seconds"])
	denied(delivery_window.deny, "maximum_batching_window_in_seconds is known only after apply") with input as aws(function, invoke_config, queue, m)
}

test_aws_visibility_unset_denied if {
	denied(delivery_window.deny, "visibility_timeout_seconds is not set") with input as aws(function, invoke_config, set(queue, {"visibility_timeout_seconds": null}), mapping)
}

test_aws_retention_unknown_denied if {
	q := plans.unknown_after_apply(unset(queue, "message_retention_seconds"), ["message_retention_seconds"])
	denied(delivery_window.deny, "message_retention_seconds is known only after apply") with input as aws(function, invoke_config, q, mapping)
}

test_aws_no_redrive_policy_denied if {
	denied(delivery_window.deny, "redrive_policy is not set") with input as aws(function, invoke_config, set(queue, {"redrive_policy": null}), mapping)
}

test_aws_redrive_policy_unknown_denied if {
	q := plans.unknown_after_apply(unset(queue, "redrive_policy"), ["redrive_policy"])
	denied(delivery_window.deny, "redrive_policy is known only after apply") with input as aws(function, invoke_config, q, mapping)
}

test_aws_max_receive_count_not_a_number_denied if {
	q := set(queue, {"redrive_policy": json.marshal({"deadLetterTargetArn": "arn:aws:sqs:us-east-1:123456789012:bank-teller-dlq", "maxReceiveCount": "five"})})
	denied(delivery_window.deny, "without a numeric maxReceiveCount") with input as aws(function, invoke_config, q, mapping)
}

test_aws_queue_outside_the_plan_denied if {
	m := set(mapping, {"event_source_arn": "arn:aws:sqs:us-east-1:123456789012:elsewhere"})
	denied(delivery_window.deny, "which the plan does not show") with input as aws(function, invoke_config, queue, m)
}

test_aws_queues_of_other_functions_are_not_checked if {
	other := set(function, {"function_name": "reports", "environment": []})
	m := set(mapping, {"function_name": "reports"})
	count(delivery_window.deny) == 0 with input as plans.plan([function, invoke_config, other, set(queue, {"message_retention_seconds": 345600}), m])
}

# Before the first apply, the mapping's queue and function are ARNs Lambda and SQS have not made
# yet: the policy follows the configuration's references within the module instance.
module := `module.ssf["teller"]`

pre_apply(q) := object.union(
	plans.plan([
		plans.in_module(module, function),
		plans.in_module(module, set(invoke_config, {"function_name": "bank-teller"})),
		plans.in_module(module, q),
		plans.in_module(module, plans.unknown_after_apply(unset(unset(mapping, "event_source_arn"), "function_name"), ["event_source_arn", "function_name"])),
	]),
	{"configuration": {"root_module": {"module_calls": {"ssf": {"module": {"resources": [{
		"address": "aws_lambda_event_source_mapping.ssf",
		"mode": "managed",
		"expressions": {
			"event_source_arn": {"references": ["aws_sqs_queue.ssf.arn", "aws_sqs_queue.ssf"]},
			"function_name": {"references": ["aws_lambda_function.ssf.arn", "aws_lambda_function.ssf"]},
		},
	}]}}}}}},
)

test_aws_pre_apply_plan_follows_references if {
	count(delivery_window.deny) == 0 with input as pre_apply(queue)
	denied(delivery_window.deny, "retention 345600 s") with input as pre_apply(set(queue, {"message_retention_seconds": 345600}))
}

test_aws_mapping_to_an_unknown_function_denied if {
	m := plans.unknown_after_apply(set(mapping, {"function_name": null}), ["function_name"])
	denied(delivery_window.deny, "its function is known only after apply") with input as aws(function, invoke_config, queue, m)
}

# --- Google Cloud --------------------------------------------------------------------------------

service := plans.create("google_cloud_run_v2_service.this", "google_cloud_run_v2_service", {"template": [{
	"timeout": "60s",
	"containers": [{"env": [
		{"name": "SSFKIT_SSF", "value": "teller"},
		{"name": "SSFKIT_QUEUE", "value": "pubsub://ssfkit-bank/bank-teller?subscription=bank-teller"},
		{"name": "SSFKIT_GC_BOUND_SECONDS", "value": "900"},
	]}],
}]})

subscription := plans.create("google_pubsub_subscription.this", "google_pubsub_subscription", {
	"name": "bank-teller",
	"project": "ssfkit-bank",
	"topic": "projects/ssfkit-bank/topics/bank-teller",
	"message_retention_duration": "600s",
	"ack_deadline_seconds": 60,
	"dead_letter_policy": [{"max_delivery_attempts": 5}],
	"retry_policy": [{"minimum_backoff": "10s", "maximum_backoff": "60s"}],
	"push_config": [{"push_endpoint": "https://bank-teller-123456789012.europe-west1.run.app/queue"}],
})

topic := plans.create("google_pubsub_topic.this", "google_pubsub_topic", {"name": "bank-teller", "project": "ssfkit-bank", "message_retention_duration": null})

gcp(s, sub, t) := plans.plan([s, sub, t])

test_gcp_default_window_passes if {
	count(delivery_window.deny) == 0 with input as gcp(service, subscription, topic)
	count(delivery_window.warn) == 0 with input as gcp(service, subscription, topic)
}

test_gcp_default_retention_denied if {
	denied(delivery_window.deny, "retention 604800 s") with input as gcp(service, set(subscription, {"message_retention_duration": "604800s"}), topic)
}

test_gcp_retention_unset_denied if {
	denied(delivery_window.deny, "message_retention_duration is not set") with input as gcp(service, set(subscription, {"message_retention_duration": null}), topic)
}

test_gcp_retention_reaching_gc_bound_denied if {
	denied(delivery_window.deny, "900 s after it was published (retention 840 s + a push held 60 s") with input as gcp(service, set(subscription, {"message_retention_duration": "840s"}), topic)
}

test_gcp_backoff_of_ten_minutes_denied if {
	denied(delivery_window.deny, "5 deliveries held 60 s with backoffs up to 600 s") with input as gcp(service, set(subscription, {"retry_policy": [{"minimum_backoff": "10s", "maximum_backoff": "600s"}]}), topic)
}

test_gcp_no_retry_policy_denied if {
	denied(delivery_window.deny, "retry_policy.maximum_backoff is not set") with input as gcp(service, set(subscription, {"retry_policy": []}), topic)
}

test_gcp_no_dead_letter_policy_denied if {
	denied(delivery_window.deny, "dead_letter_policy.max_delivery_attempts is not set") with input as gcp(service, set(subscription, {"dead_letter_policy": []}), topic)
}

test_gcp_ack_deadline_unknown_denied if {
	sub := plans.unknown_after_apply(unset(subscription, "ack_deadline_seconds"), ["ack_deadline_seconds"])
	denied(delivery_window.deny, "ack_deadline_seconds is known only after apply") with input as gcp(service, sub, topic)
}

test_gcp_long_request_timeout_denied if {
	s := set(service, {"template": [object.union(service.change.after.template[0], {"timeout": "300s"})]})
	denied(delivery_window.deny, "retention 600 s + a push held 300 s") with input as gcp(s, subscription, topic)
}

test_gcp_topic_retention_denied if {
	denied(delivery_window.deny, "retention 86400 s") with input as gcp(service, subscription, set(topic, {"message_retention_duration": "86400s"}))
}

test_gcp_topic_retention_unknown_denied if {
	t := plans.unknown_after_apply(unset(topic, "message_retention_duration"), ["message_retention_duration"])
	denied(delivery_window.deny, "google_pubsub_topic.this: message_retention_duration is known only after apply") with input as gcp(service, subscription, t)
}

test_gcp_topic_outside_the_plan_denied if {
	denied(delivery_window.deny, "the plan does not show its topic") with input as plans.plan([service, subscription])
}

test_gcp_subscription_outside_the_plan_denied if {
	denied(delivery_window.deny, "SSFKIT_QUEUE names subscription bank-teller, which the plan does not show") with input as plans.plan([service, topic])
}

test_gcp_gc_bound_not_a_number_denied if {
	s := set(service, {"template": [{"timeout": "60s", "containers": [{"env": [{"name": "SSFKIT_GC_BOUND_SECONDS", "value": "soon"}]}]}]})
	denied(delivery_window.deny, "SSFKIT_GC_BOUND_SECONDS (soon) is not a number") with input as gcp(s, subscription, topic)
}

# A push subscription to the service's URL feeds it, whatever SSFKIT_QUEUE names.
test_gcp_push_to_the_service_url_checked if {
	s := set(service, {"urls": ["https://bank-teller-123456789012.europe-west1.run.app"]})
	other := set(subscription, {"name": "reports", "message_retention_duration": "604800s"})
	denied(delivery_window.deny, "google_pubsub_subscription.this: Pub/Sub may push a start") with input as gcp(s, other, topic)
}

# Before the first apply the subscription's topic is an ID Pub/Sub has not made yet: the policy
# follows the configuration's reference.
test_gcp_pre_apply_topic_follows_references if {
	sub := plans.unknown_after_apply(unset(subscription, "topic"), ["topic"])
	p := object.union(gcp(service, sub, set(topic, {"message_retention_duration": "86400s"})), {"configuration": {"root_module": {"resources": [{
		"address": "google_pubsub_subscription.this",
		"mode": "managed",
		"expressions": {"topic": {"references": ["google_pubsub_topic.this.id", "google_pubsub_topic.this"]}},
	}]}}})
	denied(delivery_window.deny, "retention 86400 s") with input as p
}

test_gcp_push_endpoint_nobody_can_tell_denied if {
	other := object.union(set(subscription, {"name": "reports", "push_config": [{}]}), {"address": "google_pubsub_subscription.reports"})
	unknown := object.union(other, {"change": object.union(other.change, {"after_unknown": {"push_config": [{"push_endpoint": true}]}})})
	denied(delivery_window.deny, "its push endpoint is known only after apply") with input as plans.plan([service, subscription, topic, unknown])
}

# --- Azure ---------------------------------------------------------------------------------------

default_settings := {
	"SSFKIT_SSF": "teller",
	"SSFKIT_GC_BOUND_SECONDS": "900",
	"SSFKIT_QUEUE_MESSAGE_TTL_SECONDS": "450",
	"AzureFunctionsJobHost__functionTimeout": "00:01:00",
	"AzureFunctionsJobHost__extensions__queues__maxDequeueCount": "5",
	"AzureFunctionsJobHost__extensions__queues__visibilityTimeout": "00:00:30",
}

site_template(settings) := plans.plan([plans.create("azurerm_resource_group_template_deployment.app", "azurerm_resource_group_template_deployment", {"template_content": json.marshal({"resources": [
	{"type": "Microsoft.Web/sites", "name": "bank-teller-f32a3b", "properties": {"siteConfig": {"appSettings": [{"name": k, "value": v} | some k, v in settings]}}},
	{"type": "Microsoft.Web/sites/basicPublishingCredentialsPolicies", "properties": {"allow": false}},
]})})])

function_app(settings) := plans.plan([plans.create("azurerm_function_app_flex_consumption.this", "azurerm_function_app_flex_consumption", {"app_settings": settings})])

test_azure_default_window_passes if {
	count(delivery_window.deny) == 0 with input as site_template(default_settings)
	count(delivery_window.deny) == 0 with input as function_app(default_settings)
	count(delivery_window.warn) == 0 with input as site_template(default_settings)
}

test_azure_message_ttl_unset_denied if {
	denied(delivery_window.deny, "SSFKIT_QUEUE_MESSAGE_TTL_SECONDS is null") with input as site_template(object.remove(default_settings, ["SSFKIT_QUEUE_MESSAGE_TTL_SECONDS"]))
}

test_azure_messages_that_never_expire_denied if {
	denied(delivery_window.deny, "SSFKIT_QUEUE_MESSAGE_TTL_SECONDS is -1") with input as function_app(object.union(default_settings, {"SSFKIT_QUEUE_MESSAGE_TTL_SECONDS": "-1"}))
}

test_azure_message_ttl_reaching_gc_bound_denied if {
	denied(delivery_window.deny, "900 s after it was sent (message time-to-live 900 s") with input as site_template(object.union(default_settings, {"SSFKIT_QUEUE_MESSAGE_TTL_SECONDS": "900"}))
}

test_azure_dequeues_reaching_gc_bound_denied if {
	denied(delivery_window.deny, "maxDequeueCount 10 x (functionTimeout 60 s + visibilityTimeout 30 s)") with input as site_template(object.union(default_settings, {"AzureFunctionsJobHost__extensions__queues__maxDequeueCount": "10"}))
}

test_azure_dequeue_count_unset_denied if {
	denied(delivery_window.deny, "maxDequeueCount is null") with input as function_app(object.remove(default_settings, ["AzureFunctionsJobHost__extensions__queues__maxDequeueCount"]))
}

test_azure_retry_delay_unset_denied if {
	denied(delivery_window.deny, "visibilityTimeout is null") with input as site_template(object.remove(default_settings, ["AzureFunctionsJobHost__extensions__queues__visibilityTimeout"]))
}

test_azure_gc_bound_not_a_number_denied if {
	denied(delivery_window.deny, "SSFKIT_GC_BOUND_SECONDS (x) is not a number") with input as site_template(object.union(default_settings, {"SSFKIT_GC_BOUND_SECONDS": "x"}))
}

# Before the first apply the module's template embeds IDs Azure has not made yet: a warning.
test_azure_unknown_template_warns if {
	p := plans.plan([plans.unknown_after_apply(plans.create("azurerm_resource_group_template_deployment.app", "azurerm_resource_group_template_deployment", {}), ["template_content"])])
	count(delivery_window.deny) == 0 with input as p
	count(delivery_window.warn) == 1 with input as p
}
