"""One module per recipe (`neurosym reproduce ...`)."""
