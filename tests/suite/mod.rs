mod agent;
mod agent_support;
mod daemon;
mod support;
mod web;
