//! Children of any kind: create from a template with a controller
//! reference, delete, patch, with events on the owner.
