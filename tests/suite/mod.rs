mod agent;
mod agent_support;
mod daemon;
mod providers;
mod replay;
mod support;
mod web;
