mod daemon;
mod support;
mod web;
