# No delivery outlives T: a platform must never deliver a start (a queue message, an
# asynchronous invocation) to an SSF later than SSFKIT_GC_BOUND_SECONDS (T) after it was sent,
# or it could start an instance whose logs the garbage collector is removing. Every setting that
# lets a start wait or come back must keep the delivery window below T (docs/protocol.md,
# "Delivery windows"; the ssf modules derive them and expose delivery_window_seconds).
#
# Fail closed: a setting the window depends on that is missing, null, known only after apply or
# not a number is a violation, not a pass, and so is a start path the plan does not show (a
# mapping whose function or queue it cannot tell, a queue or subscription that is not in it).
# Only a function app deployed through a template the plan does not know yet is a warning: it
# cannot be told from any other resource until the apply.
package ssfkit.delivery_window

import data.ssfkit.lib

# --- Helpers -----------------------------------------------------------------------------------

# A number of seconds: a JSON number, or a decimal string (environments and app settings).
num(x) := x if is_number(x)

num(x) := to_number(x) if {
	is_string(x)
	regex.match(`^[0-9]+(\.[0-9]+)?$`, x)
}

# Google's durations, "600s".
duration(x) := to_number(trim_suffix(x, "s")) if {
	is_string(x)
	regex.match(`^[0-9]+(\.[0-9]+)?s$`, x)
}

# .NET time spans of host.json, "hh:mm:ss".
timespan(x) := (((to_number(p[0]) * 60) + to_number(p[1])) * 60) + to_number(p[2]) if {
	is_string(x)
	regex.match(`^[0-9]{1,2}:[0-5][0-9]:[0-5][0-9]$`, x)
	p := split(x, ":")
}

# Why a setting fails the check.
why(r, path) := "known only after apply" if lib.unknown(r, path)

why(r, path) := "not set" if {
	not lib.unknown(r, path)
	lib.value(r, path) == null
}

why(r, path) := sprintf("%v, not a number", [v]) if {
	not lib.unknown(r, path)
	v := lib.value(r, path)
	v != null
}

number_at(r, path) := v if {
	not lib.unknown(r, path)
	v := lib.value(r, path)
	is_number(v)
}

hint := "with ssfkit's ssf modules: raise gc_bound_seconds, or lower max_receive_count or function_timeout_seconds"

# --- AWS: Lambda asynchronous invocations, SQS event source mappings ---------------------------

# SSF functions: Lambda functions whose environment sets T.
lambda_ssfs contains f if {
	some r in lib.resources_of("aws_lambda_function")
	some e in object.get(r.values, "environment", [])
	raw := object.get(object.get(e, "variables", {}), "SSFKIT_GC_BOUND_SECONDS", null)
	raw != null
	f := object.union(r, {"t": raw})
}

deny contains msg if {
	some f in lambda_ssfs
	not num(f.t)
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (%v) is not a number of seconds: no delivery window can be checked against it", [f.address, f.t])
}

# Whether the function name or ARN name designates function f (a version or alias suffix too).
designates(name, f) if {
	is_string(name)
	name in {f.values.function_name, object.get(f.values, "arn", null)}
}

designates(name, f) if {
	is_string(name)
	regex.match(sprintf(`^arn:[^:]+:lambda:[^:]+:[^:]*:function:%s(:[^:]+)?$`, [f.values.function_name]), name)
}

# Whether the attribute of r at path (a function name or ARN) names f, by its planned value or,
# when the plan knows that only after apply, by the configuration's reference.
names_function(r, path, f) if {
	not lib.unknown(r, path)
	designates(lib.value(r, path), f)
}

names_function(r, path, f) if {
	lib.unknown(r, path)
	f.address in {x.address | some x in lib.referenced(r, path)}
}

# The event-invoke configurations of f's unqualified function, which its asynchronous
# invocations (by name, as the runtime and the scheduler make them) follow.
invoke_configs(f) := {c |
	some c in lib.resources_of("aws_lambda_function_event_invoke_config")
	object.get(c.values, "qualifier", null) in {null, "", "$LATEST"}
	names_function(c, ["function_name"], f)
}

deny contains msg if {
	some f in lambda_ssfs
	count(invoke_configs(f)) == 0
	msg := sprintf("%s: no aws_lambda_function_event_invoke_config bounds its asynchronous invocations: Lambda keeps and retries them for up to 6 hours, beyond SSFKIT_GC_BOUND_SECONDS (T = %v s)", [f.address, f.t])
}

deny contains msg if {
	some f in lambda_ssfs
	some c in invoke_configs(f)
	some attr in ["maximum_event_age_in_seconds", "maximum_retry_attempts"]
	not number_at(c, [attr])
	msg := sprintf("%s: %s is %s, so the delivery window of %s's asynchronous invocations cannot be checked against SSFKIT_GC_BOUND_SECONDS (T = %v s): set it", [c.address, attr, why(c, [attr]), f.address, f.t])
}

# Lambda waits 1 minute before the first retry after a function error and 2 before the second;
# each attempt may run the function's timeout (Lambda's longest, 900 s, when the plan does not
# know it). Whether Lambda ages a retried event or not, its last attempt starts by then.
deny contains msg if {
	some f in lambda_ssfs
	t := num(f.t)
	some c in invoke_configs(f)
	age := number_at(c, ["maximum_event_age_in_seconds"])
	retries := number_at(c, ["maximum_retry_attempts"])
	timeout := lambda_timeout(f)
	window := (age + (retries * timeout)) + ((30 * retries) * (retries + 1))
	window >= t
	msg := sprintf("%s: Lambda may start an asynchronous invocation of %s %v s after it was sent (maximum event age %v s, %v retries of up to %v s after waits of 1 and 2 minutes), not below SSFKIT_GC_BOUND_SECONDS (T = %v s): lower maximum_event_age_in_seconds or maximum_retry_attempts, or raise T (%s)", [c.address, f.address, window, age, retries, timeout, t, hint])
}

lambda_timeout(f) := number_at(f, ["timeout"])

lambda_timeout(f) := 900 if not number_at(f, ["timeout"])

# Event source mappings that feed an SSF function.
ssf_mappings contains [e, f] if {
	some e in lib.resources_of("aws_lambda_event_source_mapping")
	some f in lambda_ssfs
	names_function(e, ["function_name"], f)
}

# A mapping whose function the plan cannot tell may feed an SSF.
deny contains msg if {
	count(lambda_ssfs) > 0
	some e in lib.resources_of("aws_lambda_event_source_mapping")
	lib.unknown(e, ["function_name"])
	count({x | some x in lib.referenced(e, ["function_name"]); x.type == "aws_lambda_function"}) == 0
	msg := sprintf("%s: its function is known only after apply and the configuration names no function of the plan, so it may feed an SSF a queue whose delivery window cannot be checked: name the function, or refer to its resource", [e.address])
}

reads_queue(e, q) if {
	not lib.unknown(e, ["event_source_arn"])
	arn := lib.value(e, ["event_source_arn"])
	is_string(arn)
	regex.match(`^arn:[^:]+:sqs:[^:]+:[^:]*:[^:]+$`, arn)
	some a in {object.get(q.values, "arn", null), concat("", [":", q.values.name])}
	is_string(a)
	endswith(arn, a)
}

reads_queue(e, q) if {
	lib.unknown(e, ["event_source_arn"])
	q.address in {x.address | some x in lib.referenced(e, ["event_source_arn"])}
}

ssf_queues contains [e, f, q] if {
	some [e, f] in ssf_mappings
	some q in lib.resources_of("aws_sqs_queue")
	reads_queue(e, q)
}

deny contains msg if {
	some [e, f] in ssf_mappings
	lib.unknown(e, ["event_source_arn"])
	count(lib.referenced(e, ["event_source_arn"])) == 0
	msg := sprintf("%s: its source is known only after apply and the configuration names no resource of the plan, so the delivery window of what it feeds %s cannot be checked", [e.address, f.address])
}

deny contains msg if {
	some [e, f] in ssf_mappings
	not lib.unknown(e, ["event_source_arn"])
	arn := lib.value(e, ["event_source_arn"])
	is_string(arn)
	contains(arn, ":sqs:")
	count({q | some q in lib.resources_of("aws_sqs_queue"); reads_queue(e, q)}) == 0
	msg := sprintf("%s: it feeds %s from SQS queue %s, which the plan does not show, so its delivery window cannot be checked", [e.address, f.address, arn])
}

max_receive_count(q) := n if {
	not lib.unknown(q, ["redrive_policy"])
	policy := lib.value(q, ["redrive_policy"])
	is_string(policy)
	n := num(json.unmarshal(policy).maxReceiveCount)
}

# Lambda hands a received SQS batch to the function after the batching window, SQS's 0 when
# unset.
batching_window(e) := 0 if {
	not lib.unknown(e, ["maximum_batching_window_in_seconds"])
	lib.value(e, ["maximum_batching_window_in_seconds"]) == null
}

batching_window(e) := number_at(e, ["maximum_batching_window_in_seconds"])

deny contains msg if {
	some [e, f, q] in ssf_queues
	some attr in ["message_retention_seconds", "visibility_timeout_seconds"]
	not number_at(q, [attr])
	msg := sprintf("%s: %s is %s, so the delivery window of the starts it feeds %s cannot be checked against SSFKIT_GC_BOUND_SECONDS (T = %v s): set it", [q.address, attr, why(q, [attr]), f.address, f.t])
}

deny contains msg if {
	some [e, f, q] in ssf_queues
	not max_receive_count(q)
	msg := sprintf("%s: its redrive_policy is %s, without a numeric maxReceiveCount, so the redeliveries of the starts it feeds %s are not bounded within SSFKIT_GC_BOUND_SECONDS (T = %v s): dead-letter them after maxReceiveCount receives", [q.address, why(q, ["redrive_policy"]), f.address, f.t])
}

deny contains msg if {
	some [e, f, q] in ssf_queues
	not batching_window(e)
	msg := sprintf("%s: maximum_batching_window_in_seconds is %s, so the delivery window of %s cannot be checked", [e.address, why(e, ["maximum_batching_window_in_seconds"]), f.address])
}

# The last receive happens before the retention ends, and the poller holds the message (through
# the batching window, retrying a throttled invocation) until its visibility timeout ends;
# maxReceiveCount receives each hide it for the visibility timeout.
deny contains msg if {
	some [e, f, q] in ssf_queues
	t := num(f.t)
	retention := number_at(q, ["message_retention_seconds"])
	visibility := number_at(q, ["visibility_timeout_seconds"])
	receives := max_receive_count(q)
	batching := batching_window(e)
	window := max([(retention + visibility) + batching, receives * visibility])
	window >= t
	msg := sprintf("%s: SQS may deliver a start to %s %v s after it was sent (retention %v s + visibility timeout %v s + batching window %v s; maxReceiveCount %v x visibility timeout %v s), not below SSFKIT_GC_BOUND_SECONDS (T = %v s): lower message_retention_seconds, visibility_timeout_seconds or maxReceiveCount, or raise T (%s)", [q.address, f.address, window, retention, visibility, batching, receives, visibility, t, hint])
}

# --- Google Cloud: Pub/Sub subscriptions to Cloud Run services --------------------------------

# SSF services: Cloud Run services whose container sets T.
run_ssfs contains s if {
	some r in lib.resources_of("google_cloud_run_v2_service")
	some tpl in object.get(r.values, "template", [])
	some c in object.get(tpl, "containers", [])
	t := env(c, "SSFKIT_GC_BOUND_SECONDS")
	s := object.union(r, {"t": t, "container": c, "timeout": object.get(tpl, "timeout", null)})
}

# A container's environment variable (the first of that name).
env(c, name) := values[0] if {
	values := [object.get(e, "value", null) | some e in object.get(c, "env", []); e.name == name]
	count(values) > 0
}

deny contains msg if {
	some s in run_ssfs
	not num(s.t)
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (%v) is not a number of seconds: no delivery window can be checked against it", [s.address, s.t])
}

# The subscription SSFKIT_QUEUE names: pubsub://PROJECT/TOPIC?subscription=SUB.
queue_subscription(s) := {"project": m[1], "name": m[3]} if {
	queue := env(s.container, "SSFKIT_QUEUE")
	is_string(queue)
	some m in regex.find_all_string_submatch_n(`^pubsub://([^/?]+)/([^?]+)\?(?:.*&)?subscription=([^&]+)`, queue, 1)
}

feeds_service(sub, s) if {
	q := queue_subscription(s)
	sub.values.name == q.name
	object.get(sub.values, "project", q.project) == q.project
}

feeds_service(sub, s) if {
	not lib.unknown(sub, ["push_config", 0, "push_endpoint"])
	endpoint := lib.value(sub, ["push_config", 0, "push_endpoint"])
	is_string(endpoint)
	some url in array.concat(object.get(s.values, "urls", []), [object.get(s.values, "uri", null)])
	is_string(url)
	base := trim_suffix(url, "/")
	base != ""
	startswith(concat("", [endpoint, "/"]), concat("", [base, "/"]))
}

feeds_service(sub, s) if {
	lib.unknown(sub, ["push_config", 0, "push_endpoint"])
	s.address in {x.address | some x in lib.referenced(sub, ["push_config", 0, "push_endpoint"])}
}

ssf_subscriptions contains [sub, s] if {
	some sub in lib.resources_of("google_pubsub_subscription")
	some s in run_ssfs
	feeds_service(sub, s)
}

deny contains msg if {
	some s in run_ssfs
	q := queue_subscription(s)
	count({sub | some sub in lib.resources_of("google_pubsub_subscription"); feeds_service(sub, s)}) == 0
	msg := sprintf("%s: SSFKIT_QUEUE names subscription %s, which the plan does not show, so its delivery window cannot be checked", [s.address, q.name])
}

# A push subscription whose endpoint the plan cannot tell may push to an SSF.
deny contains msg if {
	count(run_ssfs) > 0
	some sub in lib.resources_of("google_pubsub_subscription")
	lib.unknown(sub, ["push_config", 0, "push_endpoint"])
	count({x | some x in lib.referenced(sub, ["push_config", 0, "push_endpoint"]); x.type == "google_cloud_run_v2_service"}) == 0
	msg := sprintf("%s: its push endpoint is known only after apply and the configuration names no Cloud Run service of the plan, so it may push to an SSF with a delivery window that cannot be checked", [sub.address])
}

# The topic a subscription reads, by ID or name, or by the configuration's reference.
topic_of(sub) := t if {
	not lib.unknown(sub, ["topic"])
	name := lib.value(sub, ["topic"])
	is_string(name)
	some t in lib.resources_of("google_pubsub_topic")
	name in {object.get(t.values, "id", null), t.values.name, sprintf("projects/%s/topics/%s", [object.get(t.values, "project", ""), t.values.name])}
}

topic_of(sub) := t if {
	lib.unknown(sub, ["topic"])
	some t in lib.referenced(sub, ["topic"])
	t.type == "google_pubsub_topic"
}

# Topic retention (subscribers may seek back to any message it keeps) adds to the
# subscription's; a topic without it keeps nothing.
topic_retention(t) := 0 if {
	not lib.unknown(t, ["message_retention_duration"])
	lib.value(t, ["message_retention_duration"]) == null
}

topic_retention(t) := duration(lib.value(t, ["message_retention_duration"])) if not lib.unknown(t, ["message_retention_duration"])

# Cloud Run's request timeout bounds how long a push reaches the service (its longest, 3600 s,
# when the plan does not know it).
request_timeout(s) := duration(s.timeout)

request_timeout(s) := 3600 if not duration(s.timeout)

pubsub_settings := {
	"message_retention_duration": {"path": ["message_retention_duration"], "parse": "duration"},
	"ack_deadline_seconds": {"path": ["ack_deadline_seconds"], "parse": "number"},
	"dead_letter_policy.max_delivery_attempts": {"path": ["dead_letter_policy", 0, "max_delivery_attempts"], "parse": "number"},
	"retry_policy.maximum_backoff": {"path": ["retry_policy", 0, "maximum_backoff"], "parse": "duration"},
}

setting(sub, name) := v if {
	p := pubsub_settings[name]
	p.parse == "number"
	v := number_at(sub, p.path)
}

setting(sub, name) := v if {
	p := pubsub_settings[name]
	p.parse == "duration"
	not lib.unknown(sub, p.path)
	v := duration(lib.value(sub, p.path))
}

deny contains msg if {
	some [sub, s] in ssf_subscriptions
	some name, p in pubsub_settings
	not setting(sub, name)
	msg := sprintf("%s: %s is %s, so the delivery window of the starts it delivers to %s cannot be checked against SSFKIT_GC_BOUND_SECONDS (T = %v s): set it", [sub.address, name, why(sub, p.path), s.address, s.t])
}

deny contains msg if {
	some [sub, s] in ssf_subscriptions
	not topic_of(sub)
	msg := sprintf("%s: the plan does not show its topic (%s), so whether the topic's retention lets it deliver starts to %s after SSFKIT_GC_BOUND_SECONDS (T = %v s) cannot be checked", [sub.address, why(sub, ["topic"]), s.address, s.t])
}

deny contains msg if {
	some [sub, s] in ssf_subscriptions
	t := topic_of(sub)
	not topic_retention(t)
	msg := sprintf("%s: message_retention_duration is %s, so whether it lets %s deliver starts to %s after SSFKIT_GC_BOUND_SECONDS (T = %v s) cannot be checked", [t.address, why(t, ["message_retention_duration"]), sub.address, s.address, s.t])
}

# The last push starts before the retention ends and reaches the service within its hold (the
# ack deadline or the request timeout, the longer); max_delivery_attempts pushes are each held
# that long, with the longest backoff between them.
deny contains msg if {
	some [sub, s] in ssf_subscriptions
	t := num(s.t)
	retention := max([setting(sub, "message_retention_duration"), topic_retention(topic_of(sub))])
	hold := max([setting(sub, "ack_deadline_seconds"), request_timeout(s)])
	attempts := setting(sub, "dead_letter_policy.max_delivery_attempts")
	backoff := setting(sub, "retry_policy.maximum_backoff")
	window := max([retention + hold, (attempts * hold) + ((attempts - 1) * backoff)])
	window >= t
	msg := sprintf("%s: Pub/Sub may push a start to %s %v s after it was published (retention %v s + a push held %v s; %v deliveries held %v s with backoffs up to %v s), not below SSFKIT_GC_BOUND_SECONDS (T = %v s): lower message_retention_duration, ack_deadline_seconds, max_delivery_attempts or maximum_backoff, or raise T (%s)", [sub.address, s.address, window, retention, hold, attempts, hold, backoff, t, hint])
}

# --- Azure: Storage queue triggers of function apps --------------------------------------------

# SSF function apps, with their settings: azurerm function apps, and sites in Resource Manager
# templates (modules/azure/ssf deploys its app so) when the plan knows the template.
azure_ssfs contains a if {
	some type in {"azurerm_function_app_flex_consumption", "azurerm_linux_function_app", "azurerm_windows_function_app"}
	some r in lib.resources_of(type)
	settings := object.get(r.values, "app_settings", {})
	is_object(settings)
	"SSFKIT_GC_BOUND_SECONDS" in object.keys(settings)
	a := {"address": r.address, "settings": settings}
}

azure_ssfs contains a if {
	some r in lib.resources_of("azurerm_resource_group_template_deployment")
	is_string(r.values.template_content)
	some site in json.unmarshal(r.values.template_content).resources
	site.type == "Microsoft.Web/sites"
	settings := {x.name: object.get(x, "value", null) | some x in object.get(object.get(object.get(site, "properties", {}), "siteConfig", {}), "appSettings", [])}
	"SSFKIT_GC_BOUND_SECONDS" in object.keys(settings)
	a := {"address": sprintf("%s (site %v)", [r.address, object.get(site, "name", "?")]), "settings": settings}
}

warn contains msg if {
	some r in lib.resources_of("azurerm_resource_group_template_deployment")
	lib.unknown(r, ["template_content"])
	msg := sprintf("%s: the template is known only after apply, so the delivery window of a function app it deploys cannot be checked; check a plan made after it", [r.address])
}

azure_settings := {
	# The time-to-live the runtime gives each start it sends (Storage queues have no retention
	# of their own; a message without one lives 7 days, or forever with -1).
	"SSFKIT_QUEUE_MESSAGE_TTL_SECONDS": "a positive number of seconds",
	"AzureFunctionsJobHost__extensions__queues__maxDequeueCount": "a positive number",
	"AzureFunctionsJobHost__extensions__queues__visibilityTimeout": "a time span hh:mm:ss",
	"AzureFunctionsJobHost__functionTimeout": "a time span hh:mm:ss",
}

azure_setting(a, name) := v if {
	startswith(azure_settings[name], "a positive")
	v := num(object.get(a.settings, name, null))
	v > 0
}

azure_setting(a, name) := v if {
	startswith(azure_settings[name], "a time span")
	v := timespan(object.get(a.settings, name, null))
}

deny contains msg if {
	some a in azure_ssfs
	not num(a.settings.SSFKIT_GC_BOUND_SECONDS)
	msg := sprintf("%s: SSFKIT_GC_BOUND_SECONDS (%v) is not a number of seconds: no delivery window can be checked against it", [a.address, a.settings.SSFKIT_GC_BOUND_SECONDS])
}

deny contains msg if {
	some a in azure_ssfs
	some name, kind in azure_settings
	not azure_setting(a, name)
	v := object.get(a.settings, name, null)
	msg := sprintf("%s: the app setting %s is %v, not %s, so the delivery window of its queue trigger cannot be checked against SSFKIT_GC_BOUND_SECONDS (T = %v s): set it", [a.address, name, v, kind, a.settings.SSFKIT_GC_BOUND_SECONDS])
}

# No expired message is delivered; maxDequeueCount deliveries of a failing start are each held
# the function timeout and hidden the retry delay (visibilityTimeout) before the next.
deny contains msg if {
	some a in azure_ssfs
	t := num(a.settings.SSFKIT_GC_BOUND_SECONDS)
	ttl := azure_setting(a, "SSFKIT_QUEUE_MESSAGE_TTL_SECONDS")
	dequeues := azure_setting(a, "AzureFunctionsJobHost__extensions__queues__maxDequeueCount")
	retry := azure_setting(a, "AzureFunctionsJobHost__extensions__queues__visibilityTimeout")
	timeout := azure_setting(a, "AzureFunctionsJobHost__functionTimeout")
	window := max([ttl, dequeues * (timeout + retry)])
	window >= t
	msg := sprintf("%s: the queue trigger may deliver a start %v s after it was sent (message time-to-live %v s; maxDequeueCount %v x (functionTimeout %v s + visibilityTimeout %v s)), not below SSFKIT_GC_BOUND_SECONDS (T = %v s): lower the time-to-live, maxDequeueCount, functionTimeout or visibilityTimeout, or raise T (%s)", [a.address, window, ttl, dequeues, timeout, retry, t, hint])
}
